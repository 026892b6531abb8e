// Tests of the util/ primitives: coding, CRC32C, arena, status, env.

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "util/arena.h"
#include "util/coding.h"
#include "util/comparator.h"
#include "util/crc32c.h"
#include "util/env.h"
#include "util/random.h"
#include "util/status.h"
#include "util/testutil.h"

namespace shale {

TEST(CodingTest, Fixed) {
  std::string s;
  for (uint32_t v = 0; v < 100000; v++) PutFixed32(&s, v);
  const char* p = s.data();
  for (uint32_t v = 0; v < 100000; v++, p += 4) ASSERT_EQ(v, DecodeFixed32(p));

  s.clear();
  for (int power = 0; power <= 63; power++) {
    uint64_t v = uint64_t{1} << power;
    PutFixed64(&s, v - 1);
    PutFixed64(&s, v);
    PutFixed64(&s, v + 1);
  }
  p = s.data();
  for (int power = 0; power <= 63; power++, p += 24) {
    uint64_t v = uint64_t{1} << power;
    ASSERT_EQ(v - 1, DecodeFixed64(p));
    ASSERT_EQ(v, DecodeFixed64(p + 8));
    ASSERT_EQ(v + 1, DecodeFixed64(p + 16));
  }
}

TEST(CodingTest, FixedIsLittleEndian) {
  std::string dst;
  PutFixed32(&dst, 0x04030201);
  ASSERT_EQ(std::string("\x01\x02\x03\x04", 4), dst);
}

TEST(CodingTest, Varint32RoundTrip) {
  std::string s;
  for (uint32_t i = 0; i < (32 * 32); i++) {
    uint32_t v = (i / 32) << (i % 32);
    PutVarint32(&s, v);
  }
  Slice in(s);
  for (uint32_t i = 0; i < (32 * 32); i++) {
    uint32_t expected = (i / 32) << (i % 32);
    uint32_t actual;
    size_t before = in.size();
    ASSERT_TRUE(GetVarint32(&in, &actual));
    ASSERT_EQ(expected, actual);
    ASSERT_EQ(VarintLength(actual), static_cast<int>(before - in.size()));
  }
  ASSERT_TRUE(in.empty());
}

TEST(CodingTest, Varint64RoundTrip) {
  std::vector<uint64_t> values = {0, 100, ~uint64_t{0}, ~uint64_t{0} - 1};
  for (int k = 0; k < 64; k++) {
    const uint64_t power = uint64_t{1} << k;
    values.push_back(power);
    values.push_back(power - 1);
    values.push_back(power + 1);
  }
  std::string s;
  for (uint64_t v : values) PutVarint64(&s, v);
  Slice in(s);
  for (uint64_t expected : values) {
    uint64_t actual;
    ASSERT_TRUE(GetVarint64(&in, &actual));
    ASSERT_EQ(expected, actual);
  }
}

TEST(CodingTest, VarintTruncatedAndOverflow) {
  std::string s;
  PutVarint32(&s, 1u << 31);
  for (size_t len = 0; len < s.size(); len++) {
    uint32_t v;
    ASSERT_EQ(nullptr, GetVarint32Ptr(s.data(), s.data() + len, &v));
  }
  std::string overflow("\x81\x82\x83\x84\x85\x11");
  uint32_t v;
  ASSERT_EQ(nullptr, GetVarint32Ptr(overflow.data(),
                                    overflow.data() + overflow.size(), &v));
}

TEST(CodingTest, LengthPrefixedSlices) {
  std::string s;
  PutLengthPrefixedSlice(&s, Slice(""));
  PutLengthPrefixedSlice(&s, Slice("foo"));
  PutLengthPrefixedSlice(&s, Slice(std::string(200, 'x')));
  Slice in(s), v;
  ASSERT_TRUE(GetLengthPrefixedSlice(&in, &v));
  ASSERT_EQ("", v.ToString());
  ASSERT_TRUE(GetLengthPrefixedSlice(&in, &v));
  ASSERT_EQ("foo", v.ToString());
  ASSERT_TRUE(GetLengthPrefixedSlice(&in, &v));
  ASSERT_EQ(std::string(200, 'x'), v.ToString());
  ASSERT_FALSE(GetLengthPrefixedSlice(&in, &v));
}

TEST(CodingTest, BigEndianSortsNumerically) {
  char a[8], b[8];
  EncodeBigEndian64(a, 255);
  EncodeBigEndian64(b, 256);
  ASSERT_LT(Slice(a, 8).compare(Slice(b, 8)), 0);
  ASSERT_EQ(256u, DecodeBigEndian64(b));
}

TEST(CRC32CTest, StandardResults) {
  // From RFC 3720 section B.4.
  char buf[32];
  memset(buf, 0, sizeof(buf));
  ASSERT_EQ(0x8a9136aau, crc32c::Value(buf, sizeof(buf)));
  memset(buf, 0xff, sizeof(buf));
  ASSERT_EQ(0x62a8ab43u, crc32c::Value(buf, sizeof(buf)));
  for (int i = 0; i < 32; i++) buf[i] = i;
  ASSERT_EQ(0x46dd794eu, crc32c::Value(buf, sizeof(buf)));
  for (int i = 0; i < 32; i++) buf[i] = 31 - i;
  ASSERT_EQ(0x113fdb5cu, crc32c::Value(buf, sizeof(buf)));
}

TEST(CRC32CTest, HardwareMatchesPortable) {
  Random rnd(301);
  std::string data(10000, '\0');
  for (char& c : data) c = static_cast<char>(rnd.Next());
  for (size_t start = 0; start < 16; start++) {
    for (size_t len : {0, 1, 7, 8, 9, 63, 64, 65, 4000}) {
      ASSERT_EQ(crc32c::ExtendPortable(0, data.data() + start, len),
                crc32c::Value(data.data() + start, len));
    }
  }
}

TEST(CRC32CTest, ExtendAndMask) {
  ASSERT_EQ(crc32c::Value("hello world", 11),
            crc32c::Extend(crc32c::Value("hello ", 6), "world", 5));
  uint32_t crc = crc32c::Value("foo", 3);
  ASSERT_NE(crc, crc32c::Mask(crc));
  ASSERT_EQ(crc, crc32c::Unmask(crc32c::Mask(crc)));
}

TEST(ArenaTest, ManyAllocations) {
  std::vector<std::pair<size_t, char*>> allocated;
  Arena arena;
  const int N = 100000;
  size_t bytes = 0;
  Random rnd(301);
  for (int i = 0; i < N; i++) {
    size_t s = (i % (N / 10) == 0)
                   ? i
                   : (rnd.OneIn(4000) ? rnd.Uniform(6000)
                                      : (rnd.OneIn(10) ? rnd.Uniform(100)
                                                       : rnd.Uniform(20)));
    if (s == 0) s = 1;
    char* r = rnd.OneIn(10) ? arena.AllocateAligned(s) : arena.Allocate(s);
    for (size_t b = 0; b < s; b++) r[b] = i % 256;
    bytes += s;
    allocated.emplace_back(s, r);
    ASSERT_GE(arena.MemoryUsage(), bytes);
  }
  for (size_t i = 0; i < allocated.size(); i++) {
    for (size_t b = 0; b < allocated[i].first; b++) {
      ASSERT_EQ(static_cast<int>(i % 256), allocated[i].second[b] & 0xff);
    }
  }
}

TEST(StatusTest, CodesAndMessages) {
  ASSERT_TRUE(Status::OK().ok());
  ASSERT_EQ("OK", Status::OK().ToString());
  Status s = Status::Corruption("000012.log", "bad record length at 4096");
  ASSERT_TRUE(s.IsCorruption());
  ASSERT_EQ("Corruption: 000012.log: bad record length at 4096", s.ToString());
  Status copy = s;
  ASSERT_EQ(s.ToString(), copy.ToString());
  ASSERT_TRUE(Status::FromErrno("x", ENOSPC).IsNoSpace());
  ASSERT_TRUE(Status::FromErrno("x", ENOENT).IsNotFound());
  ASSERT_TRUE(Status::FromErrno("x", EIO).IsIOError());
}

TEST(ComparatorTest, Separators) {
  const Comparator* c = BytewiseComparator();
  std::string start = "abcdefgh";
  c->FindShortestSeparator(&start, Slice("abzz"));
  ASSERT_EQ("abd", start);
  std::string key =
      "\xff\xff"
      "a";
  c->FindShortSuccessor(&key);
  ASSERT_EQ(
      "\xff\xff"
      "b",
      key);
}

// A reference order: std::string's (char_traits<char>::compare is memcmp's
// unsigned byte order).
int Sign(int v) { return (v > 0) - (v < 0); }

TEST(ComparatorTest, CompareMatchesMemcmpOrder) {
  // Lengths around the 8-byte words and the 32-byte inline limit, bytes
  // that differ in sign as chars, and long shared prefixes.
  const char alphabet[] = {'\x00', '\x01', 'a', '\x7f', '\x80', '\xfe', '\xff'};
  Random rnd(301);
  auto random_key = [&](const std::string& prefix) {
    std::string s = prefix;
    const size_t n = rnd.Uniform(42);
    for (size_t i = 0; i < n; i++) s.push_back(alphabet[rnd.Uniform(7)]);
    return s;
  };
  const Comparator* c = BytewiseComparator();
  ASSERT_EQ(Comparator::Kind::kBytewise, c->kind());
  for (int i = 0; i < 20000; i++) {
    std::string a = random_key("");
    // Half the pairs share a prefix of a, so they differ late or not at all.
    std::string b = rnd.OneIn(2)
                        ? random_key(a.substr(0, rnd.Uniform(a.size() + 1)))
                        : random_key("");
    const int want = Sign(a.compare(b));
    ASSERT_EQ(want, Sign(Slice(a).compare(Slice(b)))) << i;
    ASSERT_EQ(want, Sign(c->Compare(a, b))) << i;
    ASSERT_EQ(want, Sign(CompareInline(c, a, b))) << i;
    ASSERT_EQ(0, Slice(a).compare(Slice(a)));
  }
}

TEST(EnvTest, WriteReadSyncRenameLock) {
  Env* env = Env::Default();
  std::string dir = test::TempDir("env_test");
  std::string f = dir + "/a";
  ASSERT_TRUE(WriteStringToFile(env, Slice("hello"), f, true).ok());
  std::string data;
  ASSERT_TRUE(ReadFileToString(env, f, &data).ok());
  ASSERT_EQ("hello", data);

  std::unique_ptr<RandomAccessFile> raf;
  for (bool mmap : {false, true}) {
    ASSERT_TRUE(env->NewRandomAccessFile(f, &raf, mmap).ok());
    char scratch[16];
    Slice r;
    ASSERT_TRUE(raf->Read(1, 10, &r, scratch).ok());
    ASSERT_EQ("ello", r.ToString());
  }

  ASSERT_TRUE(env->RenameFile(f, dir + "/b").ok());
  ASSERT_FALSE(env->FileExists(f));
  ASSERT_TRUE(env->SyncDir(dir).ok());
  uint64_t size;
  ASSERT_TRUE(env->GetFileSize(dir + "/b", &size).ok());
  ASSERT_EQ(5u, size);
  ASSERT_TRUE(env->GetFileSize(dir + "/missing", &size).IsNotFound());

  std::unique_ptr<FileLock> lock, lock2;
  ASSERT_TRUE(env->LockFile(dir + "/LOCK", &lock).ok());
  ASSERT_FALSE(env->LockFile(dir + "/LOCK", &lock2).ok());
  lock.reset();
  ASSERT_TRUE(env->LockFile(dir + "/LOCK", &lock2).ok());
}

}  // namespace shale
