// Clang thread-safety annotations (no-ops under other compilers). They
// document which mutex guards what, and clang checks it:
//   std::string name_ GUARDED_BY(mu_);
//   void FooLocked() EXCLUSIVE_LOCKS_REQUIRED(mu_);

#ifndef SHALE_UTIL_THREAD_ANNOTATIONS_H_
#define SHALE_UTIL_THREAD_ANNOTATIONS_H_

#if defined(__clang__)
#define SHALE_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define SHALE_THREAD_ANNOTATION(x)
#endif

#define GUARDED_BY(x) SHALE_THREAD_ANNOTATION(guarded_by(x))
#define PT_GUARDED_BY(x) SHALE_THREAD_ANNOTATION(pt_guarded_by(x))
#define EXCLUSIVE_LOCKS_REQUIRED(...) \
  SHALE_THREAD_ANNOTATION(exclusive_locks_required(__VA_ARGS__))
#define SHARED_LOCKS_REQUIRED(...) \
  SHALE_THREAD_ANNOTATION(shared_locks_required(__VA_ARGS__))
#define LOCKS_EXCLUDED(...) SHALE_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define LOCK_RETURNED(x) SHALE_THREAD_ANNOTATION(lock_returned(x))
#define NO_THREAD_SAFETY_ANALYSIS \
  SHALE_THREAD_ANNOTATION(no_thread_safety_analysis)
// For lock types (util/mutex.h).
#define CAPABILITY(x) SHALE_THREAD_ANNOTATION(capability(x))
#define SCOPED_CAPABILITY SHALE_THREAD_ANNOTATION(scoped_lockable)
#define ACQUIRE(...) SHALE_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define RELEASE(...) SHALE_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define ASSERT_CAPABILITY(x) SHALE_THREAD_ANNOTATION(assert_capability(x))

#endif  // SHALE_UTIL_THREAD_ANNOTATIONS_H_
