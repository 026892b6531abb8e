// Tests of internal keys: encoding, ordering, separators, lookup keys.

#include "db/dbformat.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace shale {
namespace {

std::string IKey(const std::string& user_key, uint64_t seq, ValueType vt) {
  std::string encoded;
  AppendInternalKey(&encoded, ParsedInternalKey(user_key, seq, vt));
  return encoded;
}

std::string Shorten(const std::string& s, const std::string& l) {
  std::string result = s;
  InternalKeyComparator(BytewiseComparator()).FindShortestSeparator(&result, l);
  return result;
}

std::string ShortSuccessor(const std::string& s) {
  std::string result = s;
  InternalKeyComparator(BytewiseComparator()).FindShortSuccessor(&result);
  return result;
}

TEST(DBFormatTest, FrozenValues) {
  // These are on disk; a change here breaks every existing WAL and SST.
  EXPECT_EQ(0, kTypeDeletion);
  EXPECT_EQ(1, kTypeValue);
  EXPECT_EQ(2, kTypeRangeDeletion);
  std::string k = IKey("a", 0x0102, kTypeValue);
  EXPECT_EQ(std::string("a\x01\x02\x01\0\0\0\0\0", 9), k);
}

TEST(DBFormatTest, EncodeDecodeRoundTrip) {
  const char* keys[] = {"", "k", "hello", "longggggggggggggggggggggg"};
  const uint64_t seqs[] = {1,
                           2,
                           3,
                           (1ull << 8) - 1,
                           1ull << 8,
                           (1ull << 8) + 1,
                           (1ull << 16) - 1,
                           1ull << 16,
                           kMaxSequenceNumber};
  for (const char* key : keys) {
    for (uint64_t seq : seqs) {
      for (ValueType t : {kTypeValue, kTypeDeletion, kTypeRangeDeletion}) {
        std::string encoded = IKey(key, seq, t);
        ParsedInternalKey decoded;
        ASSERT_TRUE(ParseInternalKey(encoded, &decoded));
        EXPECT_EQ(key, decoded.user_key.ToString());
        EXPECT_EQ(seq, decoded.sequence);
        EXPECT_EQ(t, decoded.type);
      }
    }
  }
}

TEST(DBFormatTest, ParseRejectsBadKeys) {
  ParsedInternalKey decoded;
  EXPECT_FALSE(ParseInternalKey(Slice("bar"), &decoded));  // too short
  std::string bad = IKey("foo", 5, kTypeValue);
  bad[bad.size() - 8] = 7;  // unknown type
  EXPECT_FALSE(ParseInternalKey(bad, &decoded));
}

TEST(DBFormatTest, Ordering) {
  InternalKeyComparator cmp(BytewiseComparator());
  // User key ascending, then sequence descending, then type descending.
  EXPECT_LT(cmp.Compare(IKey("a", 5, kTypeValue), IKey("b", 5, kTypeValue)), 0);
  EXPECT_LT(cmp.Compare(IKey("a", 6, kTypeValue), IKey("a", 5, kTypeValue)), 0);
  EXPECT_LT(cmp.Compare(IKey("a", 5, kTypeValue), IKey("a", 5, kTypeDeletion)),
            0);
  EXPECT_EQ(cmp.Compare(IKey("a", 5, kTypeValue), IKey("a", 5, kTypeValue)), 0);
  // A seek key sorts before every entry of its user key at or below it.
  EXPECT_LT(
      cmp.Compare(IKey("a", 5, kValueTypeForSeek), IKey("a", 5, kTypeValue)),
      0);
  EXPECT_LT(
      cmp.Compare(IKey("a", 5, kValueTypeForSeek), IKey("a", 4, kTypeValue)),
      0);
  EXPECT_GT(
      cmp.Compare(IKey("a", 5, kValueTypeForSeek), IKey("a", 6, kTypeDeletion)),
      0);
  // Prefixes sort first.
  EXPECT_LT(cmp.Compare(IKey("a", 1, kTypeValue), IKey("ab", 9, kTypeValue)),
            0);
}

TEST(DBFormatTest, InlineOrderMatchesCompare) {
  // Hot paths compare through CompareInline, which must be exactly Compare.
  InternalKeyComparator cmp(BytewiseComparator());
  ASSERT_EQ(Comparator::Kind::kInternalBytewise, cmp.kind());
  const std::string user_keys[] = {"",
                                   "a",
                                   "ab",
                                   "b",
                                   "\xff",
                                   std::string(20, 'k'),
                                   std::string(20, 'k') + "\x80"};
  const uint64_t seqs[] = {0, 1, 255, 256, (uint64_t{1} << 56) - 1};
  const ValueType types[] = {kTypeDeletion, kTypeValue, kValueTypeForSeek};
  std::vector<std::string> keys;
  for (const auto& u : user_keys) {
    for (uint64_t seq : seqs) {
      for (ValueType t : types) keys.push_back(IKey(u, seq, t));
    }
  }
  for (const auto& a : keys) {
    for (const auto& b : keys) {
      const int want = cmp.Compare(a, b);
      const int got = CompareInline(&cmp, a, b);
      ASSERT_EQ((want > 0) - (want < 0), (got > 0) - (got < 0));
    }
  }
  // Another user order is not declared: its comparisons stay virtual.
  class Reverse final : public Comparator {
   public:
    int Compare(const Slice& a, const Slice& b) const override {
      return b.compare(a);
    }
    const char* Name() const override { return "reverse"; }
    void FindShortestSeparator(std::string*, const Slice&) const override {}
    void FindShortSuccessor(std::string*) const override {}
  } reverse;
  InternalKeyComparator rcmp(&reverse);
  ASSERT_EQ(Comparator::Kind::kOther, rcmp.kind());
  EXPECT_GT(
      CompareInline(&rcmp, IKey("a", 1, kTypeValue), IKey("b", 1, kTypeValue)),
      0);
}

TEST(DBFormatTest, ShortestSeparator) {
  // When user keys are the same, nothing changes.
  EXPECT_EQ(IKey("foo", 100, kTypeValue),
            Shorten(IKey("foo", 100, kTypeValue), IKey("foo", 99, kTypeValue)));
  // When user keys are misordered, nothing changes.
  EXPECT_EQ(IKey("foo", 100, kTypeValue),
            Shorten(IKey("foo", 100, kTypeValue), IKey("bar", 99, kTypeValue)));
  // When user keys differ but the result would not be shorter.
  EXPECT_EQ(
      IKey("foo", 100, kTypeValue),
      Shorten(IKey("foo", 100, kTypeValue), IKey("foq", 200, kTypeValue)));
  // Shortened, with the largest trailer so it still sorts after "foobar".
  EXPECT_EQ(
      IKey("g", kMaxSequenceNumber, kValueTypeForSeek),
      Shorten(IKey("foobar", 100, kTypeValue), IKey("hello", 200, kTypeValue)));
  // One is a prefix of the other.
  EXPECT_EQ(
      IKey("foo", 100, kTypeValue),
      Shorten(IKey("foo", 100, kTypeValue), IKey("foobar", 200, kTypeValue)));
}

TEST(DBFormatTest, ShortSuccessor) {
  EXPECT_EQ(IKey("g", kMaxSequenceNumber, kValueTypeForSeek),
            ShortSuccessor(IKey("foo", 100, kTypeValue)));
  EXPECT_EQ(IKey("\xff\xff", 100, kTypeValue),
            ShortSuccessor(IKey("\xff\xff", 100, kTypeValue)));
}

TEST(DBFormatTest, LookupKey) {
  for (size_t len : {0, 1, 150, 300, 5000}) {
    std::string user_key(len, 'k');
    LookupKey lk(user_key, 42);
    EXPECT_EQ(user_key, lk.user_key().ToString());
    EXPECT_EQ(IKey(user_key, 42, kValueTypeForSeek),
              lk.internal_key().ToString());
    Slice mk = lk.memtable_key();
    uint32_t n;
    const char* p = GetVarint32Ptr(mk.data(), mk.data() + mk.size(), &n);
    ASSERT_NE(nullptr, p);
    EXPECT_EQ(len + 8, n);
    EXPECT_EQ(lk.internal_key(), Slice(p, n));
  }
}

TEST(DBFormatTest, EscapeKey) {
  EXPECT_EQ("abc", EscapeKey("abc"));
  EXPECT_EQ("a\\x00\\xff\\x5c", EscapeKey(Slice("a\0\xff\\", 4)));
}

}  // namespace
}  // namespace shale
