// Endian-neutral encoding of integers and length-prefixed strings.
//
// Fixed-width integers are little-endian. Varints use 7 bits per byte with
// the high bit set on every byte but the last (as in protocol buffers).
// These encodings are part of every on-disk format: do not change them.

#ifndef SHALE_UTIL_CODING_H_
#define SHALE_UTIL_CODING_H_

#include <cstdint>
#include <cstring>
#include <string>

#include "util/slice.h"

namespace shale {

// Maximum encoded lengths.
constexpr int kMaxVarint32Length = 5;
constexpr int kMaxVarint64Length = 10;

// Append to *dst.
void PutFixed32(std::string* dst, uint32_t value);
void PutFixed64(std::string* dst, uint64_t value);
void PutVarint32(std::string* dst, uint32_t value);
void PutVarint64(std::string* dst, uint64_t value);
void PutLengthPrefixedSlice(std::string* dst, const Slice& value);

// Parse from the front of *input and advance it past what was parsed.
// Return false (leaving *input unspecified) when the input is malformed or
// too short.
bool GetVarint32(Slice* input, uint32_t* value);
bool GetVarint64(Slice* input, uint64_t* value);
bool GetFixed32(Slice* input, uint32_t* value);
bool GetFixed64(Slice* input, uint64_t* value);
bool GetLengthPrefixedSlice(Slice* input, Slice* result);

// Pointer-based varint parsing: decode from [p, limit) and return the byte
// after the value, or nullptr on malformed or truncated input.
const char* GetVarint32Ptr(const char* p, const char* limit, uint32_t* v);
const char* GetVarint64Ptr(const char* p, const char* limit, uint64_t* v);

// Number of bytes the varint encoding of v takes.
int VarintLength(uint64_t v);

// Lower-level writers: write to dst, return the byte after the encoding.
// REQUIRES: dst has room for the encoding.
char* EncodeVarint32(char* dst, uint32_t value);
char* EncodeVarint64(char* dst, uint64_t value);

inline void EncodeFixed32(char* dst, uint32_t value) {
  memcpy(dst, &value, sizeof(value));  // x86-64 and arm64 are little-endian
  static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__);
}

inline void EncodeFixed64(char* dst, uint64_t value) {
  memcpy(dst, &value, sizeof(value));
}

inline uint32_t DecodeFixed32(const char* ptr) {
  uint32_t v;
  memcpy(&v, ptr, sizeof(v));
  return v;
}

inline uint64_t DecodeFixed64(const char* ptr) {
  uint64_t v;
  memcpy(&v, ptr, sizeof(v));
  return v;
}

// Big-endian 64-bit, for keys that must sort numerically (range IDs, Raft
// indexes in engine keys).
inline void EncodeBigEndian64(char* dst, uint64_t value) {
  value = __builtin_bswap64(value);
  memcpy(dst, &value, sizeof(value));
}

inline uint64_t DecodeBigEndian64(const char* ptr) {
  uint64_t v;
  memcpy(&v, ptr, sizeof(v));
  return __builtin_bswap64(v);
}

// Fast path for the common one-byte varint; falls back to the general case.
const char* GetVarint32PtrFallback(const char* p, const char* limit,
                                   uint32_t* value);
inline const char* GetVarint32Ptr(const char* p, const char* limit,
                                  uint32_t* value) {
  if (p < limit) {
    uint32_t result = *reinterpret_cast<const unsigned char*>(p);
    if ((result & 128) == 0) {
      *value = result;
      return p + 1;
    }
  }
  return GetVarint32PtrFallback(p, limit, value);
}

}  // namespace shale

#endif  // SHALE_UTIL_CODING_H_
