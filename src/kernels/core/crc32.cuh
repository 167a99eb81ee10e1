// CRC-32 as zlib computes it (IEEE 802.3, reflected polynomial 0xEDB88320, initial value and
// final xor 0xFFFFFFFF): what Python's zlib.crc32 and every zlib verify on the host. A block of a
// move is checksummed by many threads at once: each folds its own contiguous chunk into a raw
// CRC (initial value 0, no final xor); the raw CRC being linear, the chunks' CRCs are shifted to
// their place by multiplications modulo the polynomial and xored (zlib's crc32_combine rule).
#pragma once

#include <cstdint>
#include <cuda_runtime.h>

namespace cachestore::kernels::crc32 {

inline constexpr uint32_t kPolynomial = 0xEDB88320u;  // reflected: bit 31 is x^0

// a * b modulo the polynomial (both reflected).
__host__ __device__ inline uint32_t multiply(uint32_t a, uint32_t b) {
  uint32_t product = 0;
  for (int i = 0; i < 32; ++i) {
    if (a & (0x80000000u >> i)) product ^= b;
    b = (b & 1u) ? (b >> 1) ^ kPolynomial : b >> 1;
  }
  return product;
}

// x^(8 * bytes) modulo the polynomial: appending that many zero bytes to a raw CRC multiplies it
// by this.
__host__ __device__ inline uint32_t zero_bytes_operator(uint64_t bytes) {
  uint32_t result = 0x80000000u;  // x^0
  uint32_t power = 0x00800000u;   // x^8: one byte
  for (; bytes != 0; bytes >>= 1) {
    if (bytes & 1u) result = multiply(result, power);
    power = multiply(power, power);
  }
  return result;
}

// What the move kernel's threads need to checksum one plane's blocks of `vectors` vectors of
// `vector_bytes` with `threads` threads (computed on the host, a plane at a time). Thread i folds
// the i-th of `threads` contiguous chunks of `rounds` vectors, the block padded at its front with
// zero vectors to rounds * threads (leading zeros leave a raw CRC unchanged).
struct BlockConstants {
  uint32_t levels[8];  // x^(8 * rounds * vector_bytes * 2^k): appending 2^k chunks
  uint32_t finish;     // the initial value's and final xor's share: the raw CRC's xor term
  uint32_t rounds;     // vectors a thread
  uint32_t front;      // padding vectors before the first (rounds * threads - vectors)
};

__host__ inline BlockConstants block_constants(uint32_t vectors, uint32_t vector_bytes,
                                               uint32_t threads) {
  BlockConstants k{};
  k.rounds = (vectors + threads - 1) / threads;
  k.front = k.rounds * threads - vectors;
  for (int i = 0; i < 8; ++i)
    k.levels[i] = zero_bytes_operator((uint64_t{k.rounds} * vector_bytes) << i);
  k.finish = multiply(0xFFFFFFFFu, zero_bytes_operator(uint64_t{vectors} * vector_bytes)) ^
             0xFFFFFFFFu;
  return k;
}

// Slicing-by-4 tables in shared memory: bytes[k][b], the raw CRC of byte b followed by k zero
// bytes.
struct Tables {
  uint32_t bytes[4][256];
};

__device__ inline void build_tables(Tables& t) {
  for (uint32_t b = threadIdx.x; b < 256; b += blockDim.x) {
    uint32_t c = b;
    for (int i = 0; i < 8; ++i) c = (c & 1u) ? (c >> 1) ^ kPolynomial : c >> 1;
    t.bytes[0][b] = c;
  }
  __syncthreads();
  for (int k = 1; k < 4; ++k) {
    for (uint32_t b = threadIdx.x; b < 256; b += blockDim.x) {
      const uint32_t c = t.bytes[k - 1][b];
      t.bytes[k][b] = (c >> 8) ^ t.bytes[0][c & 0xffu];
    }
    __syncthreads();
  }
}

// The raw CRC c continued over the bytes of v (little-endian, as they lie in memory).
template <typename Vec>
__device__ __forceinline__ uint32_t update(const Tables& t, uint32_t c, const Vec& v) {
  if constexpr (sizeof(Vec) >= 4) {
    uint32_t words[sizeof(Vec) / 4];
    memcpy(words, &v, sizeof(Vec));
#pragma unroll
    for (int i = 0; i < static_cast<int>(sizeof(Vec) / 4); ++i) {
      const uint32_t x = c ^ words[i];
      // bytes[k] of the byte that has k bytes after it within the word.
      c = t.bytes[3][x & 0xffu] ^ t.bytes[2][(x >> 8) & 0xffu] ^
          t.bytes[1][(x >> 16) & 0xffu] ^ t.bytes[0][x >> 24];
    }
  } else {
    uint8_t bytes[sizeof(Vec)];
    memcpy(bytes, &v, sizeof(Vec));
#pragma unroll
    for (int i = 0; i < static_cast<int>(sizeof(Vec)); ++i)
      c = t.bytes[0][(c ^ bytes[i]) & 0xffu] ^ (c >> 8);
  }
  return c;
}

// The block's CRC-32 from each thread's chunk (in thread order), to every thread: a tree over
// the warp's lanes, then over the warps (at most 8, in warp 0, padded at the front).
__device__ inline uint32_t combine_block(uint32_t part, const BlockConstants& k,
                                         uint32_t* warp_parts) {
  const uint32_t lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
#pragma unroll
  for (int level = 0; level < 5; ++level) {
    const uint32_t offset = 1u << level;
    const uint32_t later = __shfl_down_sync(0xffffffffu, part, offset);
    if ((lane & (2 * offset - 1)) == 0) part = multiply(part, k.levels[level]) ^ later;
  }
  if (threadIdx.x < 8 - warps) warp_parts[threadIdx.x] = 0;
  if (lane == 0) warp_parts[8 - warps + warp] = part;
  __syncthreads();
  if (warp == 0) {
    part = lane < 8 ? warp_parts[lane] : 0;
#pragma unroll
    for (int level = 5; level < 8; ++level) {
      const uint32_t offset = 1u << (level - 5);
      const uint32_t later = __shfl_down_sync(0xffffffffu, part, offset);
      if ((lane & (2 * offset - 1)) == 0) part = multiply(part, k.levels[level]) ^ later;
    }
    if (lane == 0) warp_parts[0] = part ^ k.finish;
  }
  __syncthreads();
  return warp_parts[0];
}

}  // namespace cachestore::kernels::crc32
