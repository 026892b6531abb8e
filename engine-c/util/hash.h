// Hash: a fast non-cryptographic 32-bit hash of a byte string, used by the
// Bloom filter and the block cache's sharding. Its values are stored inside
// SST filter blocks: DO NOT CHANGE the function.

#ifndef SHALE_UTIL_HASH_H_
#define SHALE_UTIL_HASH_H_

#include <cstddef>
#include <cstdint>

namespace shale {

uint32_t Hash(const char* data, size_t n, uint32_t seed);

}  // namespace shale

#endif  // SHALE_UTIL_HASH_H_
