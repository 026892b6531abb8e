#include "util/crc32c.h"

#include <cstring>

#if defined(__SSE4_2__)
#include <nmmintrin.h>
#endif

namespace shale::crc32c {

namespace {

// Table for the reflected Castagnoli polynomial 0x82F63B78, built once.
struct Table {
  uint32_t t[256];
  Table() {
    for (uint32_t i = 0; i < 256; i++) {
      uint32_t c = i;
      for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
      t[i] = c;
    }
  }
};

}  // namespace

uint32_t ExtendPortable(uint32_t crc, const char* data, size_t n) {
  static const Table table;
  const uint8_t* p = reinterpret_cast<const uint8_t*>(data);
  uint32_t l = crc ^ 0xffffffffu;
  for (size_t i = 0; i < n; i++) l = table.t[(l ^ p[i]) & 0xff] ^ (l >> 8);
  return l ^ 0xffffffffu;
}

namespace {

#if defined(__SSE4_2__)
uint32_t ExtendHardware(uint32_t crc, const char* data, size_t n) {
  const char* p = data;
  uint64_t l = crc ^ 0xffffffffu;
  // Align to 8 bytes, then eat 8 bytes per instruction.
  while (n > 0 && (reinterpret_cast<uintptr_t>(p) & 7) != 0) {
    l = _mm_crc32_u8(static_cast<uint32_t>(l), static_cast<uint8_t>(*p++));
    n--;
  }
  // Four words per iteration: a block read from disk is checked whole,
  // and the loop's own instructions cost as much as the crc32 ones.
  while (n >= 32) {
    uint64_t v[4];
    memcpy(v, p, 32);
    l = _mm_crc32_u64(l, v[0]);
    l = _mm_crc32_u64(l, v[1]);
    l = _mm_crc32_u64(l, v[2]);
    l = _mm_crc32_u64(l, v[3]);
    p += 32;
    n -= 32;
  }
  while (n >= 8) {
    uint64_t v;
    memcpy(&v, p, 8);
    l = _mm_crc32_u64(l, v);
    p += 8;
    n -= 8;
  }
  while (n > 0) {
    l = _mm_crc32_u8(static_cast<uint32_t>(l), static_cast<uint8_t>(*p++));
    n--;
  }
  return static_cast<uint32_t>(l) ^ 0xffffffffu;
}
#endif

}  // namespace

uint32_t Extend(uint32_t crc, const char* data, size_t n) {
#if defined(__SSE4_2__)
  return ExtendHardware(crc, data, n);
#else
  return ExtendPortable(crc, data, n);
#endif
}

bool IsHardwareAccelerated() {
#if defined(__SSE4_2__)
  return true;
#else
  return false;
#endif
}

}  // namespace shale::crc32c
