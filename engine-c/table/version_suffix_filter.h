// A filter policy for versioned keys (MVCC): keys that carry a version
// suffix are filtered on the key without it, so that a point read of any
// version of a key consults, and can be answered "absent" by, the filter of
// the unversioned key.
//
// The suffix is found from the key alone, as Pebble's Split does: the last
// byte of a versioned key is the length of its version suffix, counting that
// byte itself. Only keys that begin with the domain prefix are versioned
// (empty: every key); any other key, or a key whose last byte is 0 or longer
// than what follows the prefix, is filtered whole. Any deterministic choice
// of filter key keeps filters correct (a key that is in a table always
// matches its own filter key); the split only decides which keys share one.
//
// The wrapper's Name() is the inner policy's name plus the domain prefix in
// hex, and a table stores the name of the policy that built its filter: a
// table built under other settings is read without its filter (as "may
// match"), never with filter keys of the wrong shape.
//
// Thread safety: immutable; may be shared.

#ifndef SHALE_TABLE_VERSION_SUFFIX_FILTER_H_
#define SHALE_TABLE_VERSION_SUFFIX_FILTER_H_

#include <string>

#include "table/filter_policy.h"
#include "util/slice.h"

namespace shale {

// The longest domain prefix accepted (engine.h's
// SHALE_MAX_VERSIONED_KEY_PREFIX).
constexpr size_t kMaxVersionedKeyPrefix = 16;

// key without its version suffix if key is a versioned key of the domain
// prefix, else key itself.
Slice StripVersionSuffix(const Slice& key, const Slice& prefix);

// Returns a policy that filters with inner on StripVersionSuffix(key,
// prefix). Takes ownership of inner; the caller owns the result.
// REQUIRES: prefix.size() <= kMaxVersionedKeyPrefix.
const FilterPolicy* NewVersionSuffixFilterPolicy(const FilterPolicy* inner,
                                                 const Slice& prefix);

}  // namespace shale

#endif  // SHALE_TABLE_VERSION_SUFFIX_FILTER_H_
