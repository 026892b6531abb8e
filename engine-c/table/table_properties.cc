#include "table/table_properties.h"

#include <map>

#include "table/block.h"
#include "table/block_builder.h"
#include "util/coding.h"
#include "util/comparator.h"

namespace shale {

namespace {

// Property names. DO NOT CHANGE: they are stored in SSTs.
constexpr char kNumEntries[] = "shale.num.entries";
constexpr char kNumRangeTombstones[] = "shale.num.range.tombstones";
constexpr char kNumDataBlocks[] = "shale.num.data.blocks";
constexpr char kRawKeyBytes[] = "shale.raw.key.bytes";
constexpr char kRawValueBytes[] = "shale.raw.value.bytes";
constexpr char kDataBytes[] = "shale.data.bytes";
constexpr char kIndexBytes[] = "shale.index.bytes";
constexpr char kFilterBytes[] = "shale.filter.bytes";
constexpr char kComparator[] = "shale.comparator";
constexpr char kFilterPolicy[] = "shale.filter.policy";
constexpr char kCompression[] = "shale.compression";
constexpr char kUserPrefix[] = "user.";

// The uint64_t fields, by name.
struct CounterField {
  const char* name;
  uint64_t TableProperties::*field;
};
constexpr CounterField kCounters[] = {
    {kNumEntries, &TableProperties::num_entries},
    {kNumRangeTombstones, &TableProperties::num_range_tombstones},
    {kNumDataBlocks, &TableProperties::num_data_blocks},
    {kRawKeyBytes, &TableProperties::raw_key_bytes},
    {kRawValueBytes, &TableProperties::raw_value_bytes},
    {kDataBytes, &TableProperties::data_bytes},
    {kIndexBytes, &TableProperties::index_bytes},
    {kFilterBytes, &TableProperties::filter_bytes},
};

struct StringField {
  const char* name;
  std::string TableProperties::*field;
};
constexpr StringField kStrings[] = {
    {kComparator, &TableProperties::comparator_name},
    {kFilterPolicy, &TableProperties::filter_policy_name},
    {kCompression, &TableProperties::compression_name},
};

}  // namespace

void EncodeTableProperties(const TableProperties& props, std::string* dst) {
  // A block needs its keys in order: collect them in a map first.
  std::map<std::string, std::string> entries;
  for (const CounterField& c : kCounters) {
    std::string v;
    PutVarint64(&v, props.*(c.field));
    entries[c.name] = std::move(v);
  }
  for (const StringField& s : kStrings) entries[s.name] = props.*(s.field);
  for (const auto& [name, value] : props.user_properties) {
    entries[kUserPrefix + name] = value;
  }
  BlockBuilder builder(1);
  for (const auto& [name, value] : entries) builder.Add(name, value);
  const Slice block = builder.Finish();
  dst->append(block.data(), block.size());
}

Status DecodeTableProperties(const Slice& block, const std::string& file_name,
                             uint64_t offset, TableProperties* props) {
  *props = TableProperties();
  BlockContents contents;
  contents.data = block;  // not owned
  Block b(contents);
  BlockIter it;
  b.InitIter(BytewiseComparator(), 0, &file_name, offset, &it);
  const Slice user_prefix(kUserPrefix);
  for (it.SeekToFirst(); it.Valid(); it.Next()) {
    const Slice name = it.key();
    Slice value = it.value();
    if (name.starts_with(user_prefix)) {
      Slice user_name = name;
      user_name.remove_prefix(user_prefix.size());
      props->user_properties[user_name.ToString()] = value.ToString();
      continue;
    }
    bool known = false;
    for (const CounterField& c : kCounters) {
      if (name == Slice(c.name)) {
        if (!GetVarint64(&value, &(props->*(c.field))) || !value.empty()) {
          return Status::Corruption("bad property " + name.ToString(),
                                    BlockErrorContext(file_name, offset));
        }
        known = true;
        break;
      }
    }
    if (known) continue;
    for (const StringField& s : kStrings) {
      if (name == Slice(s.name)) {
        props->*(s.field) = value.ToString();
        break;
      }
    }
    // Unknown names come from newer writers: ignore them.
  }
  return it.status();
}

}  // namespace shale
