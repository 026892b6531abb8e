// Tests of the merging iterator against a sorted model, with random walks
// that change direction often, keys shared between children, empty
// children, and child errors.

#include "table/merging_iterator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "table/block.h"
#include "table/block_builder.h"
#include "util/comparator.h"
#include "util/random.h"

namespace shale {

namespace {

// One child's data, kept alive for the iterators over it.
struct ChildData {
  std::string bytes;
  std::unique_ptr<Block> block;
};

// The model: (key, child) in merged order - key ascending, then child
// ascending (the documented order of equal keys).
using Entry = std::pair<std::string, int>;

class MergingTest : public testing::Test {
 protected:
  // Splits keys among n children (each key in one child, or, with
  // duplicates, sometimes in several) and builds the model.
  void Build(Random* rnd, int n, int num_keys, bool duplicates) {
    children_.clear();
    model_.clear();
    std::vector<std::set<std::string>> keys(n);
    for (int i = 0; i < num_keys; i++) {
      const std::string k = "key" + std::to_string(rnd->Uniform(num_keys * 4));
      const int c = static_cast<int>(rnd->Uniform(n));
      keys[c].insert(k);
      if (duplicates && rnd->OneIn(3)) keys[rnd->Uniform(n)].insert(k);
    }
    for (int c = 0; c < n; c++) {
      BlockBuilder builder(4);
      for (const std::string& k : keys[c]) {
        builder.Add(k, Value(k, c));
        model_.emplace_back(k, c);
      }
      auto data = std::make_unique<ChildData>();
      data->bytes = builder.Finish().ToString();
      BlockContents contents;
      contents.data = Slice(data->bytes);
      data->block = std::make_unique<Block>(contents);
      children_.push_back(std::move(data));
    }
    std::sort(model_.begin(), model_.end());
  }

  static std::string Value(const std::string& k, int child) {
    return k + "@" + std::to_string(child);
  }

  Iterator* NewMerged() {
    std::vector<Iterator*> iters;
    for (auto& c : children_) {
      iters.push_back(c->block->NewIterator(BytewiseComparator()));
    }
    return NewMergingIterator(BytewiseComparator(), iters.data(),
                              static_cast<int>(iters.size()));
  }

  void ExpectAt(size_t pos, const Iterator& it) {
    if (pos >= model_.size()) {
      ASSERT_FALSE(it.Valid()) << "expected end";
      return;
    }
    ASSERT_TRUE(it.Valid()) << "expected " << model_[pos].first;
    ASSERT_EQ(model_[pos].first, it.key().ToString());
    ASSERT_EQ(Value(model_[pos].first, model_[pos].second),
              it.value().ToString());
  }

  size_t LowerBound(const std::string& target) const {
    return std::lower_bound(model_.begin(), model_.end(), Entry(target, -1)) -
           model_.begin();
  }

  // A random walk of Seek/SeekToFirst/SeekToLast/Next/Prev checked step by
  // step against the model; direction changes are frequent.
  void RandomWalk(Random* rnd, int steps) {
    std::unique_ptr<Iterator> it(NewMerged());
    const size_t end = model_.size();
    size_t pos = end;
    for (int step = 0; step < steps; step++) {
      const uint64_t op = rnd->Uniform(20);
      if (op == 0) {
        it->SeekToFirst();
        pos = 0;
      } else if (op == 1) {
        it->SeekToLast();
        pos = model_.empty() ? end : model_.size() - 1;
      } else if (op < 4 || pos == end) {
        // Mostly near existing keys (just before, at, just after), so that
        // seeks land everywhere rather than past the end.
        std::string target = model_.empty()
                                 ? std::string("key")
                                 : model_[rnd->Uniform(model_.size())].first;
        switch (rnd->Uniform(3)) {
          case 0:
            target += "~";
            break;
          case 1:
            target.back()--;
            break;
          default:
            break;
        }
        it->Seek(target);
        pos = LowerBound(target);
      } else if (op < 12) {
        it->Next();
        pos++;
      } else {
        it->Prev();
        pos = (pos == 0) ? end : pos - 1;
      }
      ExpectAt(pos, *it);
      if (HasFatalFailure()) {
        ADD_FAILURE() << "at step " << step;
        return;
      }
      ASSERT_TRUE(it->status().ok());
    }
  }

  std::vector<std::unique_ptr<ChildData>> children_;
  std::vector<Entry> model_;
};

}  // namespace

TEST_F(MergingTest, NoChildren) {
  std::unique_ptr<Iterator> it(
      NewMergingIterator(BytewiseComparator(), nullptr, 0));
  it->SeekToFirst();
  EXPECT_FALSE(it->Valid());
  EXPECT_TRUE(it->status().ok());
}

TEST_F(MergingTest, ForwardAndBackwardScans) {
  Random rnd(1);
  for (int n : {1, 2, 3, 8, 33}) {
    Build(&rnd, n, 1000, false);
    std::unique_ptr<Iterator> it(NewMerged());
    size_t pos = 0;
    for (it->SeekToFirst(); it->Valid(); it->Next(), pos++) ExpectAt(pos, *it);
    EXPECT_EQ(model_.size(), pos);
    for (it->SeekToLast(); it->Valid(); it->Prev()) ExpectAt(--pos, *it);
    EXPECT_EQ(0u, pos);
  }
}

TEST_F(MergingTest, RandomWalksDistinctKeys) {
  Random rnd(2);
  for (int n : {2, 3, 5, 16}) {
    SCOPED_TRACE("children " + std::to_string(n));
    Build(&rnd, n, 800, false);
    RandomWalk(&rnd, 20000);
  }
}

TEST_F(MergingTest, RandomWalksSharedKeys) {
  Random rnd(3);
  for (int n : {2, 3, 7}) {
    SCOPED_TRACE("children " + std::to_string(n));
    Build(&rnd, n, 500, true);
    RandomWalk(&rnd, 20000);
  }
}

// Children holding long runs of consecutive keys (as LSM levels do), so the
// top child often stays on top for many steps.
TEST_F(MergingTest, RandomWalksLongRuns) {
  Random rnd(6);
  for (int n : {2, 3, 4, 9}) {
    SCOPED_TRACE("children " + std::to_string(n));
    children_.clear();
    model_.clear();
    std::vector<std::vector<std::string>> keys(n);
    int child = 0;
    for (int i = 0; i < 1500; i++) {
      if (rnd.OneIn(40)) child = static_cast<int>(rnd.Uniform(n));
      char key[16];
      snprintf(key, sizeof(key), "key%05d", i);
      keys[child].push_back(key);
    }
    for (int c = 0; c < n; c++) {
      BlockBuilder builder(16);
      for (const std::string& k : keys[c]) {
        builder.Add(k, Value(k, c));
        model_.emplace_back(k, c);
      }
      auto data = std::make_unique<ChildData>();
      data->bytes = builder.Finish().ToString();
      BlockContents contents;
      contents.data = Slice(data->bytes);
      data->block = std::make_unique<Block>(contents);
      children_.push_back(std::move(data));
    }
    std::sort(model_.begin(), model_.end());
    RandomWalk(&rnd, 20000);
  }
}

TEST_F(MergingTest, EmptyChildren) {
  Random rnd(4);
  Build(&rnd, 6, 30, false);  // most children hold few or no keys
  RandomWalk(&rnd, 5000);
  Build(&rnd, 4, 0, false);  // all empty
  std::unique_ptr<Iterator> it(NewMerged());
  it->SeekToFirst();
  EXPECT_FALSE(it->Valid());
  it->SeekToLast();
  EXPECT_FALSE(it->Valid());
}

TEST_F(MergingTest, ChildErrorEndsIteration) {
  Random rnd(5);
  Build(&rnd, 3, 100, false);
  std::vector<Iterator*> iters;
  for (auto& c : children_) {
    iters.push_back(c->block->NewIterator(BytewiseComparator()));
  }
  iters.push_back(NewErrorIterator(Status::Corruption("child broke")));
  std::unique_ptr<Iterator> it(NewMergingIterator(
      BytewiseComparator(), iters.data(), static_cast<int>(iters.size())));
  it->SeekToFirst();
  EXPECT_FALSE(it->Valid());
  EXPECT_TRUE(it->status().IsCorruption());
  it->Seek("key5");
  EXPECT_FALSE(it->Valid());
  EXPECT_TRUE(it->status().IsCorruption());
}

}  // namespace shale
