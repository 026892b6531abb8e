// Tests of the generic two-level iterator: an index block whose values name
// data blocks (some empty), walked in both directions and sought, plus
// errors from the block function.

#include "table/two_level_iterator.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "table/block.h"
#include "table/block_builder.h"
#include "util/coding.h"
#include "util/comparator.h"
#include "util/random.h"

namespace shale {

namespace {

struct OwnedBlock {
  std::string bytes;
  std::unique_ptr<Block> block;
};

std::unique_ptr<OwnedBlock> MakeBlock(
    const std::vector<std::pair<std::string, std::string>>& entries) {
  BlockBuilder builder(4);
  for (const auto& [k, v] : entries) builder.Add(k, v);
  auto b = std::make_unique<OwnedBlock>();
  b->bytes = builder.Finish().ToString();
  BlockContents contents;
  contents.data = Slice(b->bytes);
  b->block = std::make_unique<Block>(contents);
  return b;
}

// Data blocks addressed by number (the index value is fixed32(number));
// numbers >= blocks.size() fail, as a missing file would.
struct Blocks {
  std::vector<std::unique_ptr<OwnedBlock>> blocks;
  int opened = 0;
};

Iterator* OpenBlock(void* arg, const TableReadOptions&, const Slice& value) {
  Blocks* b = static_cast<Blocks*>(arg);
  b->opened++;
  if (value.size() != 4) return NewErrorIterator(Status::Corruption("bad"));
  const uint32_t n = DecodeFixed32(value.data());
  if (n >= b->blocks.size()) {
    return NewErrorIterator(Status::IOError("block " + std::to_string(n)));
  }
  return b->blocks[n]->block->NewIterator(BytewiseComparator());
}

class TwoLevelTest : public testing::Test {
 protected:
  // Splits model into data blocks of random sizes (some empty) and builds
  // an index of separators: each block's last key, or for an empty block
  // the previous separator plus a NUL byte (all keys have one length, so
  // that still sorts before the next block's keys).
  void Build(Random* rnd, int num_keys, int bad_block = -1) {
    model_.clear();
    for (int i = 0; i < num_keys; i++) {
      model_["key" + std::to_string(10000 + rnd->Uniform(num_keys * 5))] =
          "v" + std::to_string(i);
    }
    blocks_ = Blocks();
    BlockBuilder index(1);
    auto it = model_.begin();
    std::string sep;
    uint32_t n = 0;
    while (it != model_.end()) {
      std::vector<std::pair<std::string, std::string>> entries;
      const int size = static_cast<int>(rnd->Uniform(6));  // 0..5
      for (int i = 0; i < size && it != model_.end(); i++, ++it) {
        entries.emplace_back(it->first, it->second);
      }
      if (entries.empty()) {
        sep.push_back('\0');
      } else {
        sep = entries.back().first;
      }
      blocks_.blocks.push_back(MakeBlock(entries));
      std::string handle;
      PutFixed32(&handle, static_cast<int>(n) == bad_block ? 999999 : n);
      index.Add(sep, handle);
      n++;
    }
    index_ = std::make_unique<OwnedBlock>();
    index_->bytes = index.Finish().ToString();
    BlockContents contents;
    contents.data = Slice(index_->bytes);
    index_->block = std::make_unique<Block>(contents);
  }

  Iterator* NewIter() {
    return NewTwoLevelIterator(index_->block->NewIterator(BytewiseComparator()),
                               &OpenBlock, &blocks_, TableReadOptions());
  }

  std::map<std::string, std::string> model_;
  Blocks blocks_;
  std::unique_ptr<OwnedBlock> index_;
};

}  // namespace

TEST_F(TwoLevelTest, WalkBothWaysAndSeek) {
  Random rnd(9);
  for (int round = 0; round < 5; round++) {
    Build(&rnd, 300);
    std::unique_ptr<Iterator> it(NewIter());
    auto pos = model_.begin();
    for (it->SeekToFirst(); it->Valid(); it->Next(), ++pos) {
      ASSERT_NE(model_.end(), pos);
      ASSERT_EQ(pos->first, it->key().ToString());
      ASSERT_EQ(pos->second, it->value().ToString());
    }
    ASSERT_EQ(model_.end(), pos);
    auto rpos = model_.rbegin();
    for (it->SeekToLast(); it->Valid(); it->Prev(), ++rpos) {
      ASSERT_NE(model_.rend(), rpos);
      ASSERT_EQ(rpos->first, it->key().ToString());
    }
    ASSERT_EQ(model_.rend(), rpos);
    for (int i = 0; i < 200; i++) {
      const std::string target =
          "key" + std::to_string(10000 + rnd.Uniform(1600));
      it->Seek(target);
      auto expect = model_.lower_bound(target);
      if (expect == model_.end()) {
        ASSERT_FALSE(it->Valid());
      } else {
        ASSERT_TRUE(it->Valid());
        ASSERT_EQ(expect->first, it->key().ToString());
        if (expect != model_.begin()) {
          it->Prev();
          ASSERT_TRUE(it->Valid());
          ASSERT_EQ(std::prev(expect)->first, it->key().ToString());
        }
      }
    }
    ASSERT_TRUE(it->status().ok());
  }
}

TEST_F(TwoLevelTest, KeepsTheOpenBlockForEntriesInIt) {
  Random rnd(10);
  Build(&rnd, 200);
  std::unique_ptr<Iterator> it(NewIter());
  int n = 0;
  for (it->SeekToFirst(); it->Valid(); it->Next()) n++;
  EXPECT_EQ(static_cast<int>(model_.size()), n);
  // Each block opened once on the way through.
  EXPECT_EQ(static_cast<int>(blocks_.blocks.size()), blocks_.opened);
}

TEST_F(TwoLevelTest, BlockErrorStopsIteration) {
  Random rnd(11);
  Build(&rnd, 300, /*bad_block=*/20);
  std::unique_ptr<Iterator> it(NewIter());
  int n = 0;
  for (it->SeekToFirst(); it->Valid(); it->Next()) n++;
  EXPECT_LT(n, static_cast<int>(model_.size()));
  EXPECT_TRUE(it->status().IsIOError()) << it->status().ToString();
  // Backwards the error is met from the other side.
  for (it->SeekToLast(); it->Valid(); it->Prev()) {
  }
  EXPECT_TRUE(it->status().IsIOError());
  // A seek elsewhere starts afresh.
  it->Seek(model_.begin()->first);
  EXPECT_TRUE(it->Valid());
  EXPECT_TRUE(it->status().ok());
}

}  // namespace shale
