// RoPE operands of the rotating stores' tests (KvCase, StoreCase): a cos/sin cache of true
// angles and the positions of one step.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "cachestore/cachestore.h"
#include "reference/conversions.h"

namespace cachestore::test {

// cos / sin of pos * 10000^(-2i / rotary_dim) in `type`, [max_position, rotary_dim] (cos in the
// first half), as engines build theirs.
inline std::vector<uint8_t> cos_sin_table(KvDataType type, int64_t max_position,
                                          int32_t rotary_dim) {
  const int32_t half = rotary_dim / 2;
  const int64_t bytes = type == KvDataType::kFp32 ? 4 : 2;
  std::vector<uint8_t> cs(static_cast<size_t>(bytes * max_position * rotary_dim));
  for (int64_t pos = 0; pos < max_position; ++pos) {
    for (int32_t i = 0; i < half; ++i) {
      const double angle = static_cast<double>(pos) * std::pow(10000.0, -2.0 * i / rotary_dim);
      const float v[2] = {static_cast<float>(std::cos(angle)), static_cast<float>(std::sin(angle))};
      for (int k = 0; k < 2; ++k) {
        uint8_t* at = cs.data() + bytes * (pos * rotary_dim + k * half + i);
        if (type == KvDataType::kFp32) {
          std::memcpy(at, &v[k], 4);
        } else {
          const uint16_t bits = type == KvDataType::kBf16 ? reference::bf16_bits_rn(v[k])
                                                          : reference::fp16_bits_rn(v[k]);
          std::memcpy(at, &bits, 2);
        }
      }
    }
  }
  return cs;
}

// One step's positions: real rows (< real_rows) random in the cache with 0 and the last one,
// and when `faults` one below (row 1) and one past (row 3) the cache; padded rows garbage.
inline std::vector<int64_t> step_positions(std::mt19937_64& rng, int64_t num_tokens,
                                           int64_t real_rows, int64_t max_position, bool faults) {
  std::vector<int64_t> positions(static_cast<size_t>(num_tokens));
  std::uniform_int_distribution<int64_t> any(0, max_position - 1);
  for (int64_t i = 0; i < num_tokens; ++i)
    positions[i] = i < real_rows ? any(rng) : static_cast<int64_t>(rng() >> 1) - (int64_t{1} << 62);
  if (real_rows > 0) positions[0] = 0;
  if (real_rows > 1) positions[real_rows - 1] = max_position - 1;
  if (faults && real_rows > 4) {
    positions[1] = -1;
    positions[3] = max_position;
  }
  return positions;
}

}  // namespace cachestore::test
