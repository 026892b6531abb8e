// Tests of the WAL writer and reader, one per edge case of the format, on
// real files: records are written with log::Writer, the file's bytes are
// damaged in place where a case calls for it, and log::Reader reads it back.

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "log/log_format.h"
#include "log/log_reader.h"
#include "log/log_writer.h"
#include "util/coding.h"
#include "util/crc32c.h"
#include "util/env.h"
#include "util/random.h"
#include "util/testutil.h"

namespace shale::log {
namespace {

// A string of length n made of s repeated.
std::string BigString(const std::string& s, size_t n) {
  std::string r;
  while (r.size() < n) r.append(s);
  r.resize(n);
  return r;
}

std::string NumberString(int n) { return std::to_string(n) + "."; }

std::string RandomSkewedString(int i, Random* rnd) {
  return BigString(NumberString(i), rnd->Skewed(17));
}

class LogTest : public testing::Test {
 protected:
  struct Report {
    uint64_t offset;
    size_t bytes;
    Status reason;
  };

  class Collector : public Reader::Reporter {
   public:
    void Corruption(uint64_t offset, size_t bytes,
                    const Status& reason) override {
      reports.push_back(Report{offset, bytes, reason});
    }
    std::vector<Report> reports;
  };

  LogTest()
      : env_(Env::Default()),
        dir_(test::TempDir("log_test")),
        fname_(dir_ + "/000001.log") {
    ReopenForAppend(/*truncate=*/true);
  }
  ~LogTest() override {
    writer_.reset();
    file_.reset();
    test::RemoveDirRecursively(dir_);
  }

  void ReopenForAppend(bool truncate) {
    writer_.reset();
    file_.reset();
    uint64_t size = 0;
    if (truncate) {
      ASSERT_TRUE(env_->NewWritableFile(fname_, &file_).ok());
    } else {
      ASSERT_TRUE(env_->GetFileSize(fname_, &size).ok());
      ASSERT_TRUE(env_->NewAppendableFile(fname_, &file_).ok());
    }
    writer_ = std::make_unique<Writer>(file_.get(), size);
  }

  void Write(const std::string& msg) {
    ASSERT_TRUE(writer_->AddRecord(msg).ok());
  }

  std::string Contents() {
    EXPECT_TRUE(file_->Flush().ok());
    std::string data;
    EXPECT_TRUE(ReadFileToString(env_, fname_, &data).ok());
    return data;
  }

  void SetContents(const std::string& data) {
    writer_.reset();
    file_.reset();
    ASSERT_TRUE(WriteStringToFile(env_, data, fname_, false).ok());
    ReopenForAppend(false);
  }

  size_t WrittenBytes() { return Contents().size(); }

  void IncrementByte(size_t offset, int delta) {
    std::string c = Contents();
    c[offset] = static_cast<char>(c[offset] + delta);
    SetContents(c);
  }

  void SetByte(size_t offset, char v) {
    std::string c = Contents();
    c[offset] = v;
    SetContents(c);
  }

  void ShrinkSize(size_t bytes) {
    std::string c = Contents();
    c.resize(c.size() - bytes);
    SetContents(c);
  }

  // Recomputes the checksum of the physical record at header_offset with
  // payload length len, so that only the damage a test wants remains.
  void FixChecksum(size_t header_offset, size_t len) {
    std::string c = Contents();
    uint32_t crc = crc32c::Value(&c[header_offset + 6], 1 + len);
    EncodeFixed32(&c[header_offset], crc32c::Mask(crc));
    SetContents(c);
  }

  // Reads every record; reports go to reports_.
  std::vector<std::string> ReadAll(bool checksum = true) {
    std::unique_ptr<SequentialFile> f;
    EXPECT_TRUE(file_->Flush().ok());
    EXPECT_TRUE(env_->NewSequentialFile(fname_, &f).ok());
    collector_.reports.clear();
    Reader reader(f.get(), fname_, &collector_, checksum);
    std::vector<std::string> out;
    std::string scratch;
    Slice record;
    while (reader.ReadRecord(&record, &scratch)) {
      out.push_back(record.ToString());
      last_record_end_ = reader.LastRecordEnd();
    }
    reader_only_cut_short_ = reader.OnlyCutShort();
    return out;
  }

  size_t DroppedBytes() const {
    size_t n = 0;
    for (const Report& r : collector_.reports) n += r.bytes;
    return n;
  }

  std::string ReportMessages() const {
    std::string s;
    for (const Report& r : collector_.reports) s += r.reason.ToString() + "\n";
    return s;
  }

  bool ReportsContain(const std::string& what) const {
    return ReportMessages().find(what) != std::string::npos;
  }

  Env* const env_;
  const std::string dir_;
  const std::string fname_;
  std::unique_ptr<WritableFile> file_;
  std::unique_ptr<Writer> writer_;
  Collector collector_;
  uint64_t last_record_end_ = 0;
  bool reader_only_cut_short_ = true;  // of the last ReadAll
};

TEST_F(LogTest, EmptyFile) {
  EXPECT_TRUE(ReadAll().empty());
  EXPECT_TRUE(collector_.reports.empty());
}

TEST_F(LogTest, ReadWrite) {
  Write("foo");
  Write("bar");
  Write("");
  Write("xxxx");
  std::vector<std::string> got = ReadAll();
  EXPECT_EQ((std::vector<std::string>{"foo", "bar", "", "xxxx"}), got);
  EXPECT_TRUE(collector_.reports.empty()) << ReportMessages();
  EXPECT_EQ(WrittenBytes(), last_record_end_);
}

TEST_F(LogTest, ManyBlocks) {
  for (int i = 0; i < 100000; i++) Write(NumberString(i));
  std::vector<std::string> got = ReadAll();
  ASSERT_EQ(100000u, got.size());
  for (int i = 0; i < 100000; i++) ASSERT_EQ(NumberString(i), got[i]);
  EXPECT_TRUE(collector_.reports.empty());
}

TEST_F(LogTest, Fragmentation) {
  // A small record, one spanning two blocks, one spanning four.
  Write("small");
  Write(BigString("medium", 50000));
  Write(BigString("large", 100000));
  std::vector<std::string> got = ReadAll();
  ASSERT_EQ(3u, got.size());
  EXPECT_EQ("small", got[0]);
  EXPECT_EQ(BigString("medium", 50000), got[1]);
  EXPECT_EQ(BigString("large", 100000), got[2]);
  EXPECT_TRUE(collector_.reports.empty());
}

TEST_F(LogTest, MarginalTrailer) {
  // The first record leaves exactly one header's room in the block: the
  // next record starts there as an empty FIRST piece.
  const size_t n = kBlockSize - 2 * kHeaderSize;
  Write(BigString("foo", n));
  EXPECT_EQ(kBlockSize - kHeaderSize, WrittenBytes());
  Write("");
  Write("bar");
  std::vector<std::string> got = ReadAll();
  EXPECT_EQ((std::vector<std::string>{BigString("foo", n), "", "bar"}), got);
  EXPECT_TRUE(collector_.reports.empty());
}

TEST_F(LogTest, ShortTrailer) {
  // The first record leaves 3 bytes, less than a header: they become a
  // zero trailer and the next record starts in the next block.
  const size_t n = kBlockSize - 2 * kHeaderSize + 4;
  Write(BigString("foo", n));
  EXPECT_EQ(kBlockSize - kHeaderSize + 4, WrittenBytes());
  Write("");
  Write("bar");
  const std::string c = Contents();
  for (size_t i = kBlockSize - 3; i < kBlockSize; i++) {
    EXPECT_EQ(0, c[i]) << "trailer byte " << i;
  }
  std::vector<std::string> got = ReadAll();
  EXPECT_EQ((std::vector<std::string>{BigString("foo", n), "", "bar"}), got);
  EXPECT_TRUE(collector_.reports.empty());
}

TEST_F(LogTest, AlignedEof) {
  // The file ends 3 bytes short of a block boundary, where the writer has
  // not yet written the trailer: a clean end, not damage.
  const size_t n = kBlockSize - 2 * kHeaderSize + 4;
  Write(BigString("foo", n));
  EXPECT_EQ(kBlockSize - kHeaderSize + 4, WrittenBytes());
  std::vector<std::string> got = ReadAll();
  EXPECT_EQ((std::vector<std::string>{BigString("foo", n)}), got);
  EXPECT_TRUE(collector_.reports.empty());
}

TEST_F(LogTest, EndsExactlyAtBlockBoundary) {
  Write(BigString("x", kBlockSize - kHeaderSize));
  EXPECT_EQ(kBlockSize, WrittenBytes());
  EXPECT_EQ(1u, ReadAll().size());
  EXPECT_TRUE(collector_.reports.empty());
}

TEST_F(LogTest, AppendToExistingFile) {
  // A writer opened on an existing file keeps the block layout going.
  Write("hello");
  ReopenForAppend(false);
  Write(BigString("world", 40000));
  std::vector<std::string> got = ReadAll();
  EXPECT_EQ((std::vector<std::string>{"hello", BigString("world", 40000)}),
            got);
  EXPECT_TRUE(collector_.reports.empty());
}

TEST_F(LogTest, RandomRead) {
  const int kN = 500;
  Random write_rnd(301);
  for (int i = 0; i < kN; i++) Write(RandomSkewedString(i, &write_rnd));
  std::vector<std::string> got = ReadAll();
  ASSERT_EQ(static_cast<size_t>(kN), got.size());
  Random read_rnd(301);
  for (int i = 0; i < kN; i++) {
    ASSERT_EQ(RandomSkewedString(i, &read_rnd), got[i]);
  }
}

TEST_F(LogTest, GatherWriteEqualsOneRecord) {
  // AddRecordParts writes the concatenation of its parts, including empty
  // parts and parts split across block boundaries.
  const std::string a = BigString("a", 20000), b = BigString("b", 30000);
  Slice parts[] = {Slice("head"), Slice(), Slice(a), Slice(""), Slice(b)};
  ASSERT_TRUE(writer_->AddRecordParts(parts, 5).ok());
  ASSERT_TRUE(writer_->AddRecordParts(parts, 0).ok());  // an empty record
  std::vector<std::string> got = ReadAll();
  ASSERT_EQ(2u, got.size());
  EXPECT_EQ("head" + a + b, got[0]);
  EXPECT_EQ("", got[1]);
  EXPECT_TRUE(collector_.reports.empty());
}

TEST_F(LogTest, BadRecordType) {
  Write("foo");
  // Type byte 100, with a checksum that matches it.
  IncrementByte(6, 100);
  FixChecksum(0, 3);
  EXPECT_TRUE(ReadAll().empty());
  EXPECT_EQ(3u + kHeaderSize, DroppedBytes());
  EXPECT_TRUE(ReportsContain("unknown record type 101")) << ReportMessages();
}

TEST_F(LogTest, TornTailTruncatedPayload) {
  // A crash mid-append: the last record's payload is cut short.
  Write("foo");
  Write("bar");
  ShrinkSize(1);
  EXPECT_EQ((std::vector<std::string>{"foo"}), ReadAll());
  ASSERT_EQ(1u, collector_.reports.size());
  EXPECT_TRUE(ReportsContain("record truncated at end of file"))
      << ReportMessages();
  EXPECT_EQ(kHeaderSize + 3, collector_.reports[0].offset);
  EXPECT_TRUE(reader_only_cut_short_);
}

TEST_F(LogTest, TornTailTruncatedHeader) {
  Write("foo");
  Write("bar");
  ShrinkSize(3 + 4);  // keeps 3 bytes of the second header
  EXPECT_EQ((std::vector<std::string>{"foo"}), ReadAll());
  EXPECT_TRUE(ReportsContain("record header truncated at end of file"))
      << ReportMessages();
  EXPECT_TRUE(reader_only_cut_short_);
}

TEST_F(LogTest, TornTailInFragmentedRecord) {
  // The crash hit the second block of a record spanning three.
  Write("first");
  Write(BigString("x", 3 * kBlockSize / 2 + 100));
  ShrinkSize(100);
  EXPECT_EQ((std::vector<std::string>{"first"}), ReadAll());
  EXPECT_TRUE(ReportsContain("truncated at end of file")) << ReportMessages();
}

TEST_F(LogTest, BadChecksumInTheMiddle) {
  // A record failing its checksum is dropped alone; the records after it,
  // in the same block or later ones, are read, so a caller can tell the
  // damage is not a torn tail even when the log is a single block.
  Write("foo");
  Write("bar");
  Write(BigString("y", kBlockSize));  // pushes the next record past block 1
  Write("after");
  IncrementByte(kHeaderSize + 1, 1);  // a payload byte of "foo"
  std::vector<std::string> got = ReadAll();
  ASSERT_EQ(3u, got.size());
  EXPECT_EQ("bar", got[0]);
  EXPECT_EQ("after", got[2]);
  EXPECT_TRUE(ReportsContain("checksum mismatch at offset 0"))
      << ReportMessages();
  EXPECT_FALSE(reader_only_cut_short_);
}

TEST_F(LogTest, BadLengthDropsTheRestOfTheBlock) {
  // A damaged length makes the next header land inside a payload, which
  // fails its own checks in turn: the damage spreads over the rest of the
  // block, never into a record read as good.
  Write("foo");
  Write("bar");
  Write(BigString("y", kBlockSize));
  Write("after");
  IncrementByte(4, 1);  // the length of "foo": 3 -> 4
  std::vector<std::string> got = ReadAll();
  for (const std::string& r : got) {
    EXPECT_TRUE(r == "bar" || r == "after" || r.size() > 1000) << r;
  }
  EXPECT_FALSE(collector_.reports.empty());
}

TEST_F(LogTest, ChecksumNotVerifiedWhenOff) {
  Write("foo");
  IncrementByte(kHeaderSize + 1, 1);
  EXPECT_EQ((std::vector<std::string>{"fpo"}), ReadAll(/*checksum=*/false));
  EXPECT_TRUE(collector_.reports.empty());
}

TEST_F(LogTest, LengthRunsPastBlock) {
  // A length larger than what is left of a full block is damage (not a
  // torn tail: the file goes on).
  Write("foo");
  Write(BigString("z", 2 * kBlockSize));
  SetByte(5, static_cast<char>(0xff));  // length 0xff03: past the block
  FixChecksum(0, 3);
  std::vector<std::string> got = ReadAll();
  EXPECT_TRUE(ReportsContain("runs past the end of its block"))
      << ReportMessages();
}

TEST_F(LogTest, LengthRunsPastEndOfFile) {
  // The same in the last, partial block reads as a torn tail.
  Write("foo");
  SetByte(4, 100);
  EXPECT_TRUE(ReadAll().empty());
  EXPECT_TRUE(ReportsContain("record truncated at end of file"))
      << ReportMessages();
}

TEST_F(LogTest, MissingFirstPiece) {
  // Damage to a FIRST piece orphans the pieces after it.
  Write(BigString("bar", 3 * kBlockSize));
  Write("correct");
  IncrementByte(kHeaderSize + 5, 1);  // inside the FIRST piece
  std::vector<std::string> got = ReadAll();
  EXPECT_EQ((std::vector<std::string>{"correct"}), got);
  EXPECT_TRUE(ReportsContain("checksum mismatch")) << ReportMessages();
  EXPECT_TRUE(ReportsContain("without its first piece")) << ReportMessages();
}

TEST_F(LogTest, MissingLastPiece) {
  // A FIRST piece followed by a FULL record: the first record never ended.
  Write(BigString("a", kBlockSize));  // FIRST in block 0, LAST in block 1
  Write("full");
  // Turn the LAST piece (at the start of block 1) into a FULL one; the
  // FIRST piece before it is left without an end.
  SetByte(kBlockSize + 6, kFullType);
  std::string c = Contents();
  const size_t last_len = static_cast<uint8_t>(c[kBlockSize + 4]) |
                          (static_cast<uint8_t>(c[kBlockSize + 5]) << 8);
  FixChecksum(kBlockSize, last_len);
  std::vector<std::string> got = ReadAll();
  ASSERT_EQ(2u, got.size());
  EXPECT_EQ("full", got[1]);
  EXPECT_TRUE(ReportsContain("record missing its last piece"))
      << ReportMessages();
}

TEST_F(LogTest, ZeroFilledTail) {
  // File systems may leave zeros where a crash interrupted appends.
  Write("foo");
  SetContents(Contents() + std::string(1000, '\0'));
  EXPECT_EQ((std::vector<std::string>{"foo"}), ReadAll());
  EXPECT_TRUE(ReportsContain("zero-filled space")) << ReportMessages();
}

TEST_F(LogTest, NonZeroTrailer) {
  const size_t n = kBlockSize - 2 * kHeaderSize + 4;  // leaves a 3-byte trailer
  Write(BigString("foo", n));
  Write("bar");
  SetByte(kBlockSize - 1, 'x');
  EXPECT_EQ(2u, ReadAll().size());
  EXPECT_TRUE(ReportsContain("non-zero block trailer")) << ReportMessages();
}

TEST_F(LogTest, ReportNamesFileAndOffset) {
  Write("foo");
  Write("bar");
  IncrementByte(kHeaderSize + 3 + kHeaderSize, 1);  // "bar"
  EXPECT_EQ((std::vector<std::string>{"foo"}), ReadAll());
  ASSERT_EQ(1u, collector_.reports.size());
  EXPECT_EQ(kHeaderSize + 3, collector_.reports[0].offset);
  const std::string msg = collector_.reports[0].reason.ToString();
  EXPECT_NE(std::string::npos, msg.find(fname_)) << msg;
  EXPECT_NE(std::string::npos, msg.find("at offset 10")) << msg;
  EXPECT_TRUE(collector_.reports[0].reason.IsCorruption());
}

TEST_F(LogTest, LastRecordEndExcludesTornTail) {
  Write("foo");
  const uint64_t good = WrittenBytes();
  Write("bar");
  ShrinkSize(2);
  ReadAll();
  EXPECT_EQ(good, last_record_end_);
}

}  // namespace
}  // namespace shale::log
