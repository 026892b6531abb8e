// Encoding of TableProperties (table/table.h) in the properties block.
//
// The properties block is an ordinary block (block_builder.cc) with
// restart interval 1 whose keys are property names in bytewise order:
//
//   "shale.<name>" -> varint64   for the counters of TableProperties
//   "shale.<name>" -> string     for comparator, filter policy, compression
//   "user.<name>"  -> string     for TableBuilder::SetUserProperty(name, ...)
//
// Readers ignore "shale." names they do not know, so new properties can be
// added without a format version change. The names are in
// table_properties.cc: DO NOT CHANGE them.

#ifndef SHALE_TABLE_TABLE_PROPERTIES_H_
#define SHALE_TABLE_TABLE_PROPERTIES_H_

#include <cstdint>
#include <string>

#include "table/table.h"
#include "util/slice.h"
#include "util/status.h"

namespace shale {

// Appends the finished properties block for props to *dst.
void EncodeTableProperties(const TableProperties& props, std::string* dst);

// Parses a properties block; file_name and offset (of the block) name it in
// error messages.
Status DecodeTableProperties(const Slice& block, const std::string& file_name,
                             uint64_t offset, TableProperties* props);

}  // namespace shale

#endif  // SHALE_TABLE_TABLE_PROPERTIES_H_
