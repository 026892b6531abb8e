// Tests of the WriteBatch format: building, validating (every malformed
// shape is rejected as a unit) and applying to a memtable.

#include "db/write_batch.h"

#include <gtest/gtest.h>

#include <memory>

#include "db/memtable.h"
#include "util/coding.h"

namespace shale {
namespace {

// Applies batch at sequence 100 and dumps the memtable.
std::string PrintContents(const WriteBatch& b) {
  InternalKeyComparator cmp(BytewiseComparator());
  MemTable* mem = new MemTable(cmp);
  WriteBatchSummary summary;
  Status s = ValidateWriteBatch(b.Data(), BytewiseComparator(), &summary);
  std::string state;
  if (s.ok()) {
    const uint32_t n =
        InsertBatchRecords(Slice(b.Data().data() + kBatchHeaderSize,
                                 b.Data().size() - kBatchHeaderSize),
                           100, mem);
    EXPECT_EQ(n, summary.count);
    for (Iterator* it :
         {mem->NewIterator(), mem->NewRangeTombstoneIterator()}) {
      for (it->SeekToFirst(); it->Valid(); it->Next()) {
        ParsedInternalKey ikey;
        EXPECT_TRUE(ParseInternalKey(it->key(), &ikey));
        switch (ikey.type) {
          case kTypeValue:
            state += "Put(" + ikey.user_key.ToString() + ", " +
                     it->value().ToString() + ")";
            break;
          case kTypeDeletion:
            state += "Delete(" + ikey.user_key.ToString() + ")";
            break;
          case kTypeRangeDeletion:
            state += "DeleteRange(" + ikey.user_key.ToString() + ", " +
                     it->value().ToString() + ")";
            break;
        }
        state += "@" + std::to_string(ikey.sequence);
      }
      delete it;
    }
  } else {
    state = "ParseError(" + s.ToString() + ")";
  }
  mem->Unref();
  return state;
}

Status Validate(const std::string& rep) {
  WriteBatchSummary summary;
  return ValidateWriteBatch(rep, BytewiseComparator(), &summary);
}

TEST(WriteBatchTest, Empty) {
  WriteBatch batch;
  EXPECT_EQ("", PrintContents(batch));
  EXPECT_EQ(0u, batch.Count());
  EXPECT_EQ(kBatchHeaderSize, batch.Data().size());
}

TEST(WriteBatchTest, Multiple) {
  WriteBatch batch;
  batch.Put("foo", "bar");
  batch.Delete("box");
  batch.Put("baz", "boo");
  batch.DeleteRange("a", "c");
  EXPECT_EQ(4u, batch.Count());
  EXPECT_EQ(
      "Put(baz, boo)@102Delete(box)@101Put(foo, bar)@100DeleteRange(a, c)@103",
      PrintContents(batch));
}

TEST(WriteBatchTest, LaterRecordWins) {
  WriteBatch batch;
  batch.Put("k", "v1");
  batch.Put("k", "v2");
  // The newer sequence number sorts first.
  EXPECT_EQ("Put(k, v2)@101Put(k, v1)@100", PrintContents(batch));
}

TEST(WriteBatchTest, FormatIsFrozen) {
  // Byte for byte what engine.h documents; the Go encoder must agree.
  WriteBatch batch;
  batch.Put("k", "v");
  batch.Delete("d");
  batch.DeleteRange("a", "b");
  const std::string want = std::string(8, '\0') + std::string("\x03\0\0\0", 4) +
                           std::string("\x01\x01k\x01v", 5) +
                           std::string(
                               "\x00\x01"
                               "d",
                               3) +
                           std::string(
                               "\x02\x01"
                               "a\x01"
                               "b",
                               5);
  EXPECT_EQ(want, batch.Data().ToString());
}

TEST(WriteBatchTest, ShortHeader) {
  Status s = Validate(std::string(11, '\0'));
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(std::string::npos, s.ToString().find("12-byte header"));
}

TEST(WriteBatchTest, CountMismatch) {
  WriteBatch batch;
  batch.Put("a", "b");
  std::string rep = batch.Data().ToString();
  EncodeFixed32(&rep[8], 2);
  Status s = Validate(rep);
  EXPECT_TRUE(s.IsCorruption());
  EXPECT_NE(std::string::npos, s.ToString().find("header says 2 records"));
  EncodeFixed32(&rep[8], 0);
  EXPECT_TRUE(Validate(rep).IsCorruption());
}

TEST(WriteBatchTest, TruncatedRecords) {
  WriteBatch batch;
  batch.Put("key", "value");
  batch.DeleteRange("a", "z");
  batch.Delete("gone");
  const std::string full = batch.Data().ToString();
  ASSERT_TRUE(Validate(full).ok());
  // Every proper prefix past the header is malformed.
  for (size_t n = kBatchHeaderSize + 1; n < full.size(); n++) {
    Status s = Validate(full.substr(0, n));
    EXPECT_TRUE(s.IsCorruption()) << n << ": " << s.ToString();
  }
}

TEST(WriteBatchTest, UnknownTag) {
  WriteBatch batch;
  batch.Put("a", "b");
  std::string rep = batch.Data().ToString();
  rep[kBatchHeaderSize] = 0x07;
  Status s = Validate(rep);
  EXPECT_TRUE(s.IsCorruption());
  EXPECT_NE(std::string::npos, s.ToString().find("unknown record tag 7"));
}

TEST(WriteBatchTest, OversizedLength) {
  // A varint length larger than what follows must not read past the end.
  std::string rep(kBatchHeaderSize, '\0');
  EncodeFixed32(&rep[8], 1);
  rep.push_back(kTypeValue);
  PutVarint32(&rep, 0xffffffffu);
  rep.append("abc");
  EXPECT_TRUE(Validate(rep).IsCorruption());
  // A malformed varint (continuation bit on every byte).
  rep.resize(kBatchHeaderSize + 1);
  rep.append("\xff\xff\xff\xff\xff\xff", 6);
  EXPECT_TRUE(Validate(rep).IsCorruption());
}

TEST(WriteBatchTest, TrailingGarbage) {
  WriteBatch batch;
  batch.Put("a", "b");
  std::string rep = batch.Data().ToString() + "x";
  EXPECT_TRUE(Validate(rep).IsCorruption());
}

TEST(WriteBatchTest, ReversedRangeIsInvalidArgument) {
  WriteBatch batch;
  batch.DeleteRange("z", "a");
  Status s = Validate(batch.Data().ToString());
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  // An empty range is allowed (it deletes nothing).
  WriteBatch empty;
  empty.DeleteRange("m", "m");
  EXPECT_TRUE(Validate(empty.Data().ToString()).ok());
}

TEST(WriteBatchTest, Summary) {
  WriteBatch batch;
  batch.Put("a", "1");
  batch.Put("b", "2");
  batch.Delete("c");
  batch.DeleteRange("d", "e");
  WriteBatchSummary summary;
  ASSERT_TRUE(
      ValidateWriteBatch(batch.Data(), BytewiseComparator(), &summary).ok());
  EXPECT_EQ(4u, summary.count);
  EXPECT_EQ(2u, summary.puts);
  EXPECT_EQ(1u, summary.deletes);
  EXPECT_EQ(1u, summary.range_deletes);
}

TEST(WriteBatchTest, EmptyKeysAndValues) {
  WriteBatch batch;
  batch.Put("", "");
  batch.Delete("");
  EXPECT_EQ("Delete()@101Put(, )@100", PrintContents(batch));
}

}  // namespace
}  // namespace shale
