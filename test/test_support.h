// Helpers shared by host and GPU tests: random inputs, slot mappings, byte comparison.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cachestore/cachestore.h"

namespace cachestore::test {

// A fresh seed per test, printed so that a failure can be replayed (CACHESTORE_TEST_SEED=...).
inline uint64_t test_seed() {
  if (const char* fixed = std::getenv("CACHESTORE_TEST_SEED")) return std::stoull(fixed);
  return std::random_device{}() ^ (uint64_t{std::random_device{}()} << 32);
}

// Sanitizer runs are tens of times slower: gpu-check sets CACHESTORE_SANITIZER_RUN=1 and the
// heaviest loops (exhaustive conversions, 1000 PDL replays) shrink to a sample.
inline bool sanitizer_run() {
  const char* v = std::getenv("CACHESTORE_SANITIZER_RUN");
  return v != nullptr && std::string(v) == "1";
}

inline uint16_t float_to_bf16_bits(float f) {  // round to nearest even
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// Random bf16 rows: each row has its own magnitude (2^-12 .. 2^12) and random signs, so the
// blocks' amax and scales vary; never all zero.
inline std::vector<uint16_t> random_bf16_rows(std::mt19937_64& rng, int64_t rows, int64_t stride) {
  std::vector<uint16_t> out(static_cast<size_t>(rows * stride));
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-12, 12);
  for (int64_t r = 0; r < rows; ++r) {
    const float magnitude = std::ldexp(1.0f, exponent(rng));
    for (int64_t c = 0; c < stride; ++c)
      out[static_cast<size_t>(r * stride + c)] = float_to_bf16_bits(unit(rng) * magnitude);
  }
  return out;
}

inline void fill_bf16_garbage(uint16_t* row, int64_t count, std::mt19937_64& rng) {
  for (int64_t i = 0; i < count; ++i)
    row[i] = (i % 3 == 0) ? uint16_t{0x7fc1} : static_cast<uint16_t>(rng());  // NaN and noise
}

// `count` distinct slots in [0, capacity), skipping `reserved`.
inline std::vector<int64_t> distinct_slots(std::mt19937_64& rng, int64_t count, int64_t capacity,
                                           int64_t reserved) {
  std::vector<int64_t> all;
  for (int64_t s = 0; s < capacity; ++s)
    if (s != reserved) all.push_back(s);
  std::shuffle(all.begin(), all.end(), rng);
  all.resize(static_cast<size_t>(count));
  return all;
}

// What an engine leaves in the padding rows of a captured batch: slot 0, the previous replay's
// (stale) slot, or -1.
enum class Padding { kZero, kStale, kMinusOne };
inline constexpr Padding kPaddings[] = {Padding::kZero, Padding::kStale, Padding::kMinusOne};

// The slots of one replay of `rows` captured rows with n real ones: fresh distinct slots for the
// real rows, `padding` for the others.
inline std::vector<int64_t> padded_replay_slots(std::mt19937_64& rng, int64_t rows, int64_t n,
                                                int64_t capacity, Padding padding,
                                                const std::vector<int64_t>& previous) {
  std::vector<int64_t> slots = distinct_slots(rng, rows, capacity, -1);
  for (int64_t i = n; i < rows; ++i)
    slots[i] = padding == Padding::kZero ? 0 : padding == Padding::kMinusOne ? -1 : previous[i];
  return slots;
}

inline const char* slot_type_name(SlotType type) {
  switch (type) {
    case SlotType::kInt32: return "i32";
    case SlotType::kInt64: return "i64";
    case SlotType::kPageTable: return "page_table";
  }
  return "?";
}

inline std::vector<uint8_t> slots_as_bytes(const std::vector<int64_t>& slots, SlotType type) {
  std::vector<uint8_t> bytes;
  if (type == SlotType::kInt64) {
    bytes.resize(slots.size() * 8);
    std::memcpy(bytes.data(), slots.data(), bytes.size());
  } else {
    std::vector<int32_t> narrow(slots.begin(), slots.end());
    bytes.resize(narrow.size() * 4);
    std::memcpy(bytes.data(), narrow.data(), bytes.size());
  }
  return bytes;
}

template <typename T>
std::vector<uint8_t> as_bytes(const std::vector<T>& v) {
  std::vector<uint8_t> bytes(v.size() * sizeof(T));
  std::memcpy(bytes.data(), v.data(), bytes.size());
  return bytes;
}

// Byte-for-byte equality with the first differences spelled out.
inline ::testing::AssertionResult bytes_equal(const std::vector<uint8_t>& expected,
                                              const std::vector<uint8_t>& actual,
                                              const std::string& what) {
  if (expected.size() != actual.size())
    return ::testing::AssertionFailure() << what << ": size " << actual.size() << " != "
                                         << expected.size();
  size_t mismatches = 0;
  std::string first;
  for (size_t i = 0; i < expected.size(); ++i) {
    if (expected[i] == actual[i]) continue;
    if (mismatches++ < 8)
      first += " [" + std::to_string(i) + "] got " + std::to_string(actual[i]) + " want " +
               std::to_string(expected[i]) + ";";
  }
  if (mismatches == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << what << ": " << mismatches << " of " << expected.size()
                                       << " bytes differ:" << first;
}

}  // namespace cachestore::test
