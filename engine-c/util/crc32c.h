// CRC32C (Castagnoli), the checksum of every WAL record and SST block.
//
// On x86-64 the SSE4.2 crc32 instruction computes it (several GB/s); other
// machines use a table-driven fallback that gives identical results.

#ifndef SHALE_UTIL_CRC32C_H_
#define SHALE_UTIL_CRC32C_H_

#include <cstddef>
#include <cstdint>

namespace shale::crc32c {

// Returns the crc32c of concat(A, data[0,n-1]) where init_crc is the crc32c
// of some string A. Extend() is often used to maintain the crc32c of a
// stream of data.
uint32_t Extend(uint32_t init_crc, const char* data, size_t n);

// Returns the crc32c of data[0,n-1].
inline uint32_t Value(const char* data, size_t n) { return Extend(0, data, n); }

// True when the hardware instruction is in use.
bool IsHardwareAccelerated();

// The table-driven implementation, always available; tests compare it with
// the hardware path.
uint32_t ExtendPortable(uint32_t init_crc, const char* data, size_t n);

static const uint32_t kMaskDelta = 0xa282ead8ul;

// Returns a masked representation of crc. Computing the CRC of a string that
// contains embedded CRCs is problematic, so stored CRCs are masked.
inline uint32_t Mask(uint32_t crc) {
  // Rotate right by 15 bits and add a constant.
  return ((crc >> 15) | (crc << 17)) + kMaskDelta;
}

// Returns the crc whose masked representation is masked_crc.
inline uint32_t Unmask(uint32_t masked_crc) {
  uint32_t rot = masked_crc - kMaskDelta;
  return ((rot >> 17) | (rot << 15));
}

}  // namespace shale::crc32c

#endif  // SHALE_UTIL_CRC32C_H_
