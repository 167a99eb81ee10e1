// Host tests of the references, the guard and the conversions, run everywhere. Expected values
// here are worked out by hand from docs/layouts.md, or are the peers' golden records.
#include <cmath>
#include <cstring>

#include "cachestore/layout.h"
#include "detail/guard.h"
#include "detail/scale_rules.h"
#include "golden.h"
#include "reference/conversions.h"
#include "reference/reference.h"
#include "test_support.h"

namespace cachestore::test {
namespace {

using detail::RowVerdict;
using reference::e2m1_from_float;
using reference::e4m3_from_float;
using reference::e4m3_to_float;
using reference::v41_scale_byte_formula;
using reference::ue8m0_from_float_rp_satfinite;

float bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint32_t to_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

TEST(Guard, ClassifiesEveryRule) {
  EXPECT_EQ(detail::clamp_token_count(-5, 10), 0);
  EXPECT_EQ(detail::clamp_token_count(7, 10), 7);
  EXPECT_EQ(detail::clamp_token_count(11, 10), 10);
  // row, n, slot, reserved, capacity
  EXPECT_EQ(detail::classify_row(0, 1, 3, -1, 8), RowVerdict::kStore);
  EXPECT_EQ(detail::classify_row(1, 1, 3, -1, 8), RowVerdict::kSkip);         // rule 1: i >= n
  EXPECT_EQ(detail::classify_row(0, 1, -1, -1, 8), RowVerdict::kSkip);        // rule 2
  EXPECT_EQ(detail::classify_row(0, 1, 0, 0, 8), RowVerdict::kSkip);          // rule 3
  EXPECT_EQ(detail::classify_row(0, 1, 8, -1, 8), RowVerdict::kOutOfRange);   // rule 4
  EXPECT_EQ(detail::classify_row(5, 1, 8, -1, 8), RowVerdict::kSkip);         // padding, not a bug
  EXPECT_EQ(detail::classify_row(0, 1, 7, -1, 8), RowVerdict::kStore);
  EXPECT_EQ(detail::classify_row(0, 0, 7, -1, 8), RowVerdict::kSkip);
}

// The kernels' stored test (the conjunction, 32-bit owner filter) is the verdict's kStore, on
// every combination of edge values: rows around n, slots around 0, the reserved slot and the
// capacity (including ones past 2^32 and INT64 extremes), pages past 2^32, every owner layout.
TEST(Guard, StoredTestIsTheVerdictsStore) {
  const int64_t big = int64_t{1} << 33;
  const int64_t rows[] = {0, 1, 5, 6, 7, big};
  const int64_t counts[] = {-3, 0, 1, 6, 7, big + 1};
  const int64_t slots[] = {INT64_MIN, -2, -1, 0, 1, 4, 63, 64, 65, big - 1, big, big + 5, INT64_MAX};
  const int64_t reserveds[] = {-1, 0, 4, big};
  const int64_t capacities[] = {0, 1, 64, big, INT64_MAX};
  const int64_t pages[] = {0, 1, 2, 3, 7, (int64_t{1} << 32) + 1, (int64_t{1} << 40) + 6, INT64_MAX};
  int64_t cases = 0, stored = 0;
  for (int32_t owner_log2 : {0, 1, 2, 20})
    for (int32_t owner_rank : {0, 1, 3}) {
      if (owner_rank >= (1 << owner_log2)) continue;
      for (int64_t page : pages)
        for (int64_t row : rows)
          for (int64_t n : counts)
            for (int64_t slot : slots)
              for (int64_t reserved : reserveds)
                for (int64_t capacity : capacities) {
                  const bool expected =
                      detail::classify_owned_row(row, n, slot, page, reserved, capacity,
                                                 owner_log2, owner_rank) == RowVerdict::kStore;
                  ASSERT_EQ(detail::row_is_stored(row, n, slot, page, reserved, capacity,
                                                  owner_log2, owner_rank),
                            expected)
                      << "row " << row << " n " << n << " slot " << slot << " page " << page
                      << " reserved " << reserved << " capacity " << capacity << " owners 2^"
                      << owner_log2 << " rank " << owner_rank;
                  ++cases;
                  stored += expected;
                }
    }
  EXPECT_GT(stored, cases / 50);  // both answers are exercised
  // The owner filter by hand: page g is owner (g mod owner_size)'s, also above 2^32.
  EXPECT_TRUE(detail::owns_page((int64_t{1} << 32) + 3, 2, 3));
  EXPECT_FALSE(detail::owns_page((int64_t{1} << 32) + 3, 2, 2));
  EXPECT_TRUE(detail::owns_page(int64_t{5} << 20, 20, 0));
  EXPECT_TRUE(detail::owns_page((int64_t{5} << 20) + 77, 20, 77));
}

TEST(E4m3Reference, HandWorkedValues) {
  EXPECT_EQ(e4m3_from_float(1.0f), 0x38);
  EXPECT_EQ(e4m3_from_float(-1.0f), 0xb8);
  EXPECT_EQ(e4m3_from_float(448.0f), 0x7e);
  EXPECT_EQ(e4m3_from_float(-448.0f), 0xfe);
  EXPECT_EQ(e4m3_from_float(463.0f), 0x7e);  // would round to 448 anyway
  EXPECT_EQ(e4m3_from_float(465.0f), 0x7e);  // rounds past the max: saturates
  EXPECT_EQ(e4m3_from_float(1e30f), 0x7e);
  EXPECT_EQ(e4m3_from_float(INFINITY), 0x7e);
  EXPECT_EQ(e4m3_from_float(-INFINITY), 0xfe);
  EXPECT_EQ(e4m3_from_float(NAN), 0x7f);
  EXPECT_EQ(e4m3_from_float(0.0f), 0x00);
  EXPECT_EQ(e4m3_from_float(-0.0f), 0x80);
  // Ties to even: 1.0625 lies between 1.0 (0x38, even) and 1.125 (0x39).
  EXPECT_EQ(e4m3_from_float(1.0625f), 0x38);
  // 1.1875 between 1.125 (0x39) and 1.25 (0x3a, even).
  EXPECT_EQ(e4m3_from_float(1.1875f), 0x3a);
  EXPECT_EQ(e4m3_from_float(1.0626f), 0x39);  // just above the tie
  // Subnormals: k * 2^-9.
  EXPECT_EQ(e4m3_from_float(std::ldexp(1.0f, -9)), 0x01);
  EXPECT_EQ(e4m3_from_float(std::ldexp(1.0f, -10)), 0x00);       // tie 0 / 2^-9: even 0
  EXPECT_EQ(e4m3_from_float(std::ldexp(3.0f, -10)), 0x02);       // tie 1 / 2: even 2
  EXPECT_EQ(e4m3_from_float(std::ldexp(7.5f, -9)), 0x08);        // rounds up to 2^-6
  EXPECT_EQ(e4m3_from_float(std::ldexp(1.0f, -6)), 0x08);        // smallest normal
  EXPECT_EQ(e4m3_from_float(std::ldexp(1.0f, -30)), 0x00);       // far below: zero
  EXPECT_EQ(e4m3_from_float(bits(0x00000001)), 0x00);            // fp32 subnormal
  EXPECT_EQ(e4m3_from_float(240.0f), 0x77);
  EXPECT_EQ(e4m3_from_float(232.0f), 0x76);                      // tie 224/240: even 224
}

TEST(Ue8m0Reference, PtxRoundUpSatfinite) {
  EXPECT_EQ(ue8m0_from_float_rp_satfinite(1.0f), 127);
  EXPECT_EQ(ue8m0_from_float_rp_satfinite(bits(0x3f800001)), 128);  // just above 1: rounds up
  EXPECT_EQ(ue8m0_from_float_rp_satfinite(1.5f), 128);
  EXPECT_EQ(ue8m0_from_float_rp_satfinite(2.0f), 128);
  EXPECT_EQ(ue8m0_from_float_rp_satfinite(std::ldexp(1.0f, -126)), 1);
  EXPECT_EQ(ue8m0_from_float_rp_satfinite(bits(0x00400000)), 0);  // 2^-127
  EXPECT_EQ(ue8m0_from_float_rp_satfinite(bits(0x00400001)), 1);
  EXPECT_EQ(ue8m0_from_float_rp_satfinite(bits(0x00000001)), 0);
  EXPECT_EQ(ue8m0_from_float_rp_satfinite(0.0f), 0);
  EXPECT_EQ(ue8m0_from_float_rp_satfinite(std::ldexp(1.0f, 127)), 254);
  EXPECT_EQ(ue8m0_from_float_rp_satfinite(bits(0x7f000001)), 254);  // would be 2^128: saturates
  EXPECT_EQ(ue8m0_from_float_rp_satfinite(INFINITY), 254);
  EXPECT_EQ(ue8m0_from_float_rp_satfinite(NAN), 255);
  EXPECT_EQ(detail::ue8m0_to_float(127), 1.0f);
  EXPECT_EQ(to_bits(detail::ue8m0_to_float(0)), 0x00400000u);
  for (int b = 0; b < 255; ++b)
    EXPECT_EQ(detail::ue8m0_to_float(static_cast<uint8_t>(b)) *
                  detail::ue8m0_reciprocal(static_cast<uint8_t>(b)), 1.0f) << b;
}

// One 128-value block with the given values, quantized by the index-K rule.
void quantize_block(const std::vector<float>& values, ScaleRule rule, uint8_t* data, float* scale) {
  std::vector<uint16_t> k(128);
  for (int i = 0; i < 128; ++i) k[i] = float_to_bf16_bits(values[i % values.size()]);
  reference::quantize_index_k_row(k.data(), 128, rule, data, scale);
}

TEST(IndexKScaleRules, HandWorkedVectors) {
  uint8_t q[128];
  float s;
  // amax exactly 448 * 2^k: s = 2^k under both rules, and the amax value encodes as 448.
  for (int k : {-8, 0, 3}) {
    for (ScaleRule rule : {ScaleRule::kAmax, ScaleRule::kPow2}) {
      quantize_block({std::ldexp(448.0f, k), std::ldexp(-1.0f, k), 0.0f}, rule, q, &s);
      EXPECT_EQ(s, std::ldexp(1.0f, k));
      EXPECT_EQ(q[0], 0x7e);
      EXPECT_EQ(q[1], 0xb8);  // -1 * 2^k / 2^k = -1
      EXPECT_EQ(q[2], 0x00);
    }
  }
  // amax below the 1e-4 floor: s = 1e-4 / 448 (amax); pow2: 2^ceil(log2(2.23e-7)) = 2^-22.
  quantize_block({1e-5f, -2e-6f}, ScaleRule::kAmax, q, &s);
  EXPECT_EQ(s, 1e-4f / 448.0f);
  quantize_block({1e-5f, -2e-6f}, ScaleRule::kPow2, q, &s);
  EXPECT_EQ(s, std::ldexp(1.0f, -22));
  // All-zero block: the floor scale, zero payload, no NaN.
  for (ScaleRule rule : {ScaleRule::kAmax, ScaleRule::kPow2}) {
    quantize_block({0.0f}, rule, q, &s);
    EXPECT_FALSE(std::isnan(s));
    for (uint8_t b : q) EXPECT_EQ(b, 0);
  }
  // amax 1.0 with the pow2 rule: s = 2^ceil(log2(1/448)) = 2^-8; 1.0 -> 256 -> 0x78.
  quantize_block({1.0f, 0.5f}, ScaleRule::kPow2, q, &s);
  EXPECT_EQ(s, std::ldexp(1.0f, -8));
  EXPECT_EQ(q[0], 0x78);
  EXPECT_EQ(q[1], 0x70);
  // NaN is ignored by the amax and stored as NaN; Inf makes the amax infinite.
  quantize_block({2.0f, NAN}, ScaleRule::kAmax, q, &s);
  EXPECT_EQ(s, 2.0f / 448.0f);
  EXPECT_EQ(q[1], 0x7f);
  quantize_block({2.0f, INFINITY}, ScaleRule::kPow2, q, &s);
  EXPECT_EQ(s, std::ldexp(1.0f, 127));  // UE8M0 saturates
  EXPECT_EQ(q[1], 0x7e);                // Inf * 2^-127 = Inf: saturates to 448
  EXPECT_EQ(q[0], 0x00);
}

TEST(MlaScaleRules, HandWorkedVectors) {
  std::vector<uint16_t> nope(512, 0), rope(64);
  for (int i = 0; i < 64; ++i) rope[i] = static_cast<uint16_t>(0x3f80 + i);
  // V4: tile 0 amax 448 -> e = 0 (byte 127); tile 1 all zero -> e = ceil(log2(1e-4/448)) = -22.
  nope[0] = float_to_bf16_bits(448.0f);
  nope[1] = float_to_bf16_bits(-3.0f);
  uint8_t data[576], scale[8];
  reference::quantize_v4_row(nope.data(), rope.data(), data, scale);
  EXPECT_EQ(scale[0], 127);
  EXPECT_EQ(scale[1], 127 - 22);
  EXPECT_EQ(scale[7], 0);  // the pad byte
  EXPECT_EQ(data[0], 0x7e);
  EXPECT_EQ(data[1], e4m3_from_float(-3.0f));
  EXPECT_EQ(std::memcmp(data + 448, rope.data(), 128), 0);
  // V3.2: tile scale pow2 = 2^ceil(log2(max(amax/448, 1e-4))); amax = max(amax/448, FLT_MIN).
  uint8_t record[656];
  reference::quantize_v32_row(nope.data(), rope.data(), ScaleRule::kPow2, record);
  float scales[4];
  std::memcpy(scales, record + 512, 16);
  EXPECT_EQ(scales[0], 1.0f);
  EXPECT_EQ(scales[1], std::ldexp(1.0f, -13));  // all-zero tile: 1e-4 rounds up to 2^-13
  reference::quantize_v32_row(nope.data(), rope.data(), ScaleRule::kAmax, record);
  std::memcpy(scales, record + 512, 16);
  EXPECT_EQ(scales[0], 1.0f);
  EXPECT_EQ(scales[1], FLT_MIN);  // all-zero tile: never NaN
  EXPECT_EQ(record[0], 0x7e);
  EXPECT_EQ(record[128], 0x00);
  EXPECT_EQ(std::memcmp(record + 528, rope.data(), 128), 0);
}

TEST(Layout, OffsetsForEveryPageSize) {
  for (int64_t p : {1, 2, 64, 256}) {
    const int64_t index_stride = layout::min_page_stride(IndexKFormat::kFp8, p, 128);
    EXPECT_EQ(index_stride, 132 * p);
    const layout::PagedRows index_rows = layout::index_k_rows(IndexKFormat::kFp8, 128);
    EXPECT_EQ(layout::data_offset(index_rows, 3, p - 1, index_stride),
              3 * index_stride + (p - 1) * 128);
    EXPECT_EQ(layout::scale_offset(index_rows, 3, p - 1, p, index_stride),
              3 * index_stride + p * 128 + (p - 1) * 4);
    const int64_t v4 = layout::min_page_stride(MlaLayout::kV4, p);
    EXPECT_EQ(v4 % 576, 0);
    EXPECT_GE(v4, 584 * p);
    EXPECT_LT(v4 - 584 * p, 576);
    EXPECT_EQ(layout::scale_offset(layout::mla_layout(MlaLayout::kV4).rows, 2, p - 1, p, v4),
              2 * v4 + 576 * p + 8 * (p - 1));
    EXPECT_EQ(layout::min_page_stride(MlaLayout::kV32, p), 656 * p);
  }
  EXPECT_EQ(layout::min_page_stride(MlaLayout::kV4, 1), 1152);
  EXPECT_EQ(layout::min_page_stride(MlaLayout::kV4, 2), 1728);
  EXPECT_EQ(layout::min_page_stride(MlaLayout::kV4, 64), 37440);
  EXPECT_EQ(layout::min_page_stride(MlaLayout::kV4, 256), 149760);
  EXPECT_EQ(layout::min_page_stride(IndexKFormat::kFp8, 64, 128), 8448);
  EXPECT_EQ(layout::min_page_stride(IndexKFormat::kFp8, 64, 256), 64 * 264);
}

// ---- interop: the references reproduce the peers' golden records ---------------------------
TEST(Golden, ReferencesReproducePeersRecords) {
  const std::vector<uint16_t> in = golden_input();
  std::vector<uint8_t> idx_amax, idx_pow2, v32, v4;
  for (int r = 0; r < kGoldenRows; ++r) {
    const uint16_t* row = &in[static_cast<size_t>(r) * kGoldenCols];
    uint8_t rec[656];
    float scale;
    reference::quantize_index_k_row(row, 128, ScaleRule::kAmax, rec, &scale);
    std::memcpy(rec + 128, &scale, 4);
    idx_amax.insert(idx_amax.end(), rec, rec + 132);
    reference::quantize_index_k_row(row, 128, ScaleRule::kPow2, rec, &scale);
    std::memcpy(rec + 128, &scale, 4);
    idx_pow2.insert(idx_pow2.end(), rec, rec + 132);
    reference::quantize_v32_row(row, row + 512, ScaleRule::kAmax, rec);
    v32.insert(v32.end(), rec, rec + 656);
    reference::quantize_v4_row(row, row + 448, rec, rec + 576);
    v4.insert(v4.end(), rec, rec + 584);
  }
  EXPECT_TRUE(bytes_equal(read_golden<uint8_t>("index_k_fp8_amax_records_256x132.bin", 256 * 132),
                          idx_amax, "vLLM indexer, fp32 scales"));
  EXPECT_TRUE(bytes_equal(read_golden<uint8_t>("index_k_fp8_pow2_records_256x132.bin", 256 * 132),
                          idx_pow2, "vLLM indexer, ue8m0 scales"));
  EXPECT_TRUE(bytes_equal(read_golden<uint8_t>("mla_v32_amax_records_256x656.bin", 256 * 656), v32,
                          "vLLM fp8_ds_mla"));
  EXPECT_TRUE(bytes_equal(read_golden<uint8_t>("mla_v4_records_256x584.bin", 256 * 584), v4,
                          "SGLang FlashMLA V4"));
}

// SGLang's V4.1 records (V41: 512-byte data row + 16-byte scale row; V41_FP4: 256 + 32) and its
// fp4 indexer (64 + 4 bytes), under both tie rules.
TEST(Golden, V41AndFp4ReferencesReproducePeersRecords) {
  const std::vector<uint16_t> in = golden_input();
  std::vector<uint8_t> v41, v41_fp4, fp4_even, fp4_zero;
  for (int r = 0; r < kGoldenRows; ++r) {
    const uint16_t* row = &in[static_cast<size_t>(r) * kGoldenCols];
    uint8_t rec[528];
    reference::quantize_v41_row(row, row + 448, rec, rec + 512);
    v41.insert(v41.end(), rec, rec + 528);
    reference::quantize_v41_fp4_row(row, row + 448, rec, rec + 256);
    v41_fp4.insert(v41_fp4.end(), rec, rec + 288);
    reference::quantize_index_k_fp4_row(row, 128, Fp4Ties::kToEven, rec, rec + 64);
    fp4_even.insert(fp4_even.end(), rec, rec + 68);
    reference::quantize_index_k_fp4_row(row, 128, Fp4Ties::kTowardZero, rec, rec + 64);
    fp4_zero.insert(fp4_zero.end(), rec, rec + 68);
  }
  EXPECT_TRUE(bytes_equal(read_golden<uint8_t>("mla_v41_fp8_records_256x528.bin", 256 * 528), v41,
                          "SGLang V41"));
  EXPECT_TRUE(bytes_equal(read_golden<uint8_t>("mla_v41_fp4_records_256x288.bin", 256 * 288),
                          v41_fp4, "SGLang V41_FP4"));
  EXPECT_TRUE(bytes_equal(read_golden<uint8_t>("index_k_fp4_rne_records_256x68.bin", 256 * 68),
                          fp4_even, "SGLang fp4 indexer, rne=True"));
  EXPECT_TRUE(bytes_equal(read_golden<uint8_t>("index_k_fp4_tz_records_256x68.bin", 256 * 68),
                          fp4_zero, "SGLang fp4 indexer, rne=False"));
  EXPECT_NE(fp4_even, fp4_zero);  // the tie rules differ on these inputs (143 bytes at the peer)
}

TEST(E2m1Reference, HandWorkedValues) {
  // The eight magnitudes and their codes; the sign is bit 3.
  const float values[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  for (uint8_t c = 0; c < 8; ++c) {
    EXPECT_EQ(e2m1_from_float(values[c]), c);
    EXPECT_EQ(e2m1_from_float(-values[c]), c | 8);
  }
  // Ties: to even picks the even code, toward zero the smaller magnitude.
  const float ties[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
  const uint8_t even[7] = {0, 2, 2, 4, 4, 6, 6}, zero[7] = {0, 1, 2, 3, 4, 5, 6};
  for (int i = 0; i < 7; ++i) {
    EXPECT_EQ(e2m1_from_float(ties[i], true), even[i]) << ties[i];
    EXPECT_EQ(e2m1_from_float(ties[i], false), zero[i]) << ties[i];
    EXPECT_EQ(e2m1_from_float(std::nextafter(ties[i], 10.0f), false), zero[i] + 1) << ties[i];
    EXPECT_EQ(e2m1_from_float(std::nextafter(ties[i], 0.0f), true), zero[i]) << ties[i];
  }
  EXPECT_EQ(e2m1_from_float(6.5f), 0x7);     // saturates
  EXPECT_EQ(e2m1_from_float(INFINITY), 0x7);
  EXPECT_EQ(e2m1_from_float(-INFINITY), 0xf);
  EXPECT_EQ(e2m1_from_float(NAN), 0x7);      // +6 whatever the NaN's sign
  EXPECT_EQ(e2m1_from_float(-NAN), 0x7);
  EXPECT_EQ(e2m1_from_float(-0.0f), 0x8);    // the sign of zero is kept
  EXPECT_EQ(e2m1_from_float(-0.1f), 0x8);
}

// NVFP4 blocks (FlashInfer's rule) worked by hand: the scale byte, then each code of x * out.
TEST(Nvfp4Reference, HandWorkedBlocks) {
  uint8_t packed[8], sf = 0;
  // g = 1, amax 6: sf = 6 / 6 = 1 (e4m3 0x38), out = 1; every code and each tie's even choice.
  const float exact[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -6, -0.25f, 0.3f, 5, 5.5f, 2.5f, -1.25f, 0.75f};
  reference::quantize_nvfp4_block(exact, 1.0f, packed, &sf);
  EXPECT_EQ(sf, 0x38);
  const uint8_t exact_bytes[8] = {0x10, 0x32, 0x54, 0x76, 0x8F, 0x61, 0x47, 0x2A};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(packed[i], exact_bytes[i]) << "byte " << i;
  // g = 0.5, amax 3: sf = 3 / 3 = 1, out = 1 / 0.5 = 2: 1.5 -> 3.0 (code 5), -0.7 -> -1.4 (0xB).
  float half[16] = {};
  half[0] = 1.5f, half[1] = -0.7f, half[2] = 3.0f;
  reference::quantize_nvfp4_block(half, 0.5f, packed, &sf);
  EXPECT_EQ(sf, 0x38);
  EXPECT_EQ(packed[0], 0xB5);
  EXPECT_EQ(packed[1], 0x07);  // 3 * 2 = 6 (code 7), then +0
  // g = 1, amax 1.3: sf = e4m3(1.3 / 6 = 0.21667) = 0.21875 (0x26: 2^-3 * 1.75); out = 1 / sf
  // = 4.5714; 1.3 * out = 5.943 -> 6 (7); 0.1 * out = 0.457 -> 0.5 (1).
  float odd[16] = {};
  odd[0] = 1.3f, odd[1] = 0.1f;
  reference::quantize_nvfp4_block(odd, 1.0f, packed, &sf);
  EXPECT_EQ(sf, 0x26);
  EXPECT_EQ(packed[0], 0x17);
  // All zero (and -0): scale 0, out 0, codes 0 with their signs.
  float zero[16] = {};
  zero[3] = -0.0f;
  reference::quantize_nvfp4_block(zero, 1.0f, packed, &sf);
  EXPECT_EQ(sf, 0x00);
  EXPECT_EQ(packed[1], 0x80);
  EXPECT_EQ(packed[0], 0x00);
  // A NaN is left out of amax and stored as 0 whatever its sign; an Inf saturates the scale
  // (448, 0x7E) and is stored as 6, the block's finite values becoming zeros.
  float special[16] = {};
  special[0] = 6.0f, special[1] = -NAN, special[2] = NAN;
  reference::quantize_nvfp4_block(special, 1.0f, packed, &sf);
  EXPECT_EQ(sf, 0x38);
  EXPECT_EQ(packed[0], 0x07);
  EXPECT_EQ(packed[1], 0x00);
  special[3] = -INFINITY;
  reference::quantize_nvfp4_block(special, 1.0f, packed, &sf);
  EXPECT_EQ(sf, 0x7E);
  EXPECT_EQ(packed[0], 0x00);  // 6 / 448 rounds to 0; -NaN -> 0
  EXPECT_EQ(packed[1], 0xF0);  // NaN -> 0, -Inf -> -6
  // A subnormal scale: amax = 6 * 3 * 2^-9 gives sf = 3 * 2^-9 (0x03) exactly.
  float tiny[16] = {};
  tiny[0] = 6.0f * 3.0f * 0x1p-9f, tiny[1] = -tiny[0] / 2;
  reference::quantize_nvfp4_block(tiny, 1.0f, packed, &sf);
  EXPECT_EQ(sf, 0x03);
  EXPECT_EQ(packed[0], 0xD7);  // 6 (7), -3 (0xD)
  // Below the smallest scale: sf rounds to 0, so out is 0 and every code is a signed zero.
  tiny[0] = 6.0f * 0x1p-12f, tiny[1] = -tiny[0];
  reference::quantize_nvfp4_block(tiny, 1.0f, packed, &sf);
  EXPECT_EQ(sf, 0x00);
  EXPECT_EQ(packed[0], 0x80);
  // A scale that is not > 0 (0, negative, NaN) stores zeros, as amax = 0 does.
  for (float g : {0.0f, -1.0f, NAN}) {
    reference::quantize_nvfp4_block(exact, g, packed, &sf);
    EXPECT_EQ(sf, 0x00) << g;
    EXPECT_EQ(packed[4], 0x88) << g;  // -6 and -0.25 as signed zeros
  }
}

// The power-of-two scale bytes from amax's bits (detail::pow2_scale_byte: what the sm_90 image
// computes) against their formulas, for every amax the kernels can meet: amax is the largest
// magnitude of bf16 values, so every non-negative bf16 (zero, subnormals, Inf) and nothing else.
TEST(Pow2ScaleRules, BytesFromBitsMatchFormulasForEveryBf16Amax) {
  int checked = 0;
  for (uint32_t b = 0; b <= 0x7f80u; ++b) {
    const float amax = detail::bf16_bits_to_float(static_cast<uint16_t>(b));
    ASSERT_EQ(detail::v4_scale_byte(amax), reference::v4_scale_byte_formula(amax)) << amax;
    ASSERT_EQ(detail::index_k_pow2_scale_byte(amax), reference::v4_scale_byte_formula(amax))
        << amax;
    ASSERT_EQ(detail::v32_pow2_scale_byte(amax), reference::v32_pow2_scale_byte_formula(amax))
        << amax;
    if (b < 0x7f80u)  // V41 differs only for Inf (247, the peer's byte)
      ASSERT_EQ(detail::v41_scale_byte(amax), reference::v32_pow2_scale_byte_formula(amax))
          << amax;
    ++checked;
  }
  EXPECT_EQ(checked, 0x7f81);
  // By hand: 448 * 2^k -> 127 + k; just above -> one more; the floors; Inf.
  EXPECT_EQ(detail::v4_scale_byte(448.0f), 127);
  EXPECT_EQ(detail::v4_scale_byte(std::nextafter(448.0f, 1e9f)), 128);
  EXPECT_EQ(detail::v4_scale_byte(0.0f), 105);    // 1e-4 / 448 rounds up to 2^-22
  EXPECT_EQ(detail::v32_pow2_scale_byte(0.0f), 114);  // 1e-4 rounds up to 2^-13
  EXPECT_EQ(detail::v4_scale_byte(INFINITY), 254);
  EXPECT_EQ(detail::v32_pow2_scale_byte(INFINITY), 254);
}

TEST(V41ScaleRules, HandWorkedVectors) {
  // amax 448 * 2^k: scale 2^k; just above: 2^(k+1); the floor 2^-13 (byte 114); Inf: 247.
  EXPECT_EQ(v41_scale_byte_formula(448.0f), 127);
  EXPECT_EQ(detail::v41_scale_byte(448.0f), 127);
  EXPECT_EQ(detail::v41_scale_byte(std::nextafter(448.0f, 1e9f)), 128);
  EXPECT_EQ(detail::v41_scale_byte(0.0f), 114);
  EXPECT_EQ(detail::v41_scale_byte(INFINITY), 247);
  EXPECT_EQ(v41_scale_byte_formula(INFINITY), 247);
  // V41_FP4: s = e4m3(clamp(amax / 6, 2^-9, 448)); 6 -> 1.0 (0x38); 0 -> 2^-9 (0x01); Inf -> 448.
  EXPECT_EQ(e4m3_from_float(detail::v41_fp4_scale_input(6.0f)), 0x38);
  EXPECT_EQ(e4m3_from_float(detail::v41_fp4_scale_input(0.0f)), 0x01);
  EXPECT_EQ(e4m3_from_float(detail::v41_fp4_scale_input(INFINITY)), 0x7e);
  for (int b = 0; b < 0x7f; ++b)
    EXPECT_EQ(detail::e4m3_scale_to_float(static_cast<uint8_t>(b)),
              e4m3_to_float(static_cast<uint8_t>(b))) << b;
  // fp4 indexer: sf = max(amax / 6, 1e-4) rounded up to a power of two; 6 -> 127; Inf -> 254.
  EXPECT_EQ(detail::index_k_fp4_scale_byte(6.0f), 127);
  EXPECT_EQ(detail::index_k_fp4_scale_byte(6.5f), 128);
  EXPECT_EQ(detail::index_k_fp4_scale_byte(0.0f), 114);  // 1e-4 -> 2^-13
  EXPECT_EQ(detail::index_k_fp4_scale_byte(INFINITY), 254);
}

// The kernels' division by the formulas' constants (detail::quotient_by_constant: a product and
// a Markstein correction, host-compiled here) equals IEEE division for every dividend the
// formulas give it: every non-negative bf16 value (the amax), the floor 1e-4 and +Inf, wherever
// the quotient is 0 or normal (a subnormal quotient may differ; every formula clamps those to
// FLT_MIN or more). The GPU test checks the device build of the formulas themselves over every
// fp32 amax.
TEST(ScaleRules, QuotientByConstantMatchesDivisionForEveryBf16) {
  for (const float d : {detail::kE4m3Max, detail::kE2m1Max}) {
    int mismatches = 0;
    std::vector<float> dividends = {detail::kAmaxFloor, INFINITY};
    for (uint32_t b = 0; b <= 0x7f80u; ++b)
      dividends.push_back(detail::bf16_bits_to_float(static_cast<uint16_t>(b)));
    for (const float x : dividends) {
      if (x / d != 0.0f && x / d < FLT_MIN) continue;
      const float got = detail::quotient_by_constant(x, d, 1.0f / d);
      if (detail::float_bits(got) != detail::float_bits(x / d) && mismatches++ < 8)
        ADD_FAILURE() << "x = " << x << " / " << d << ": " << got << ", IEEE " << x / d;
    }
    EXPECT_EQ(mismatches, 0) << "divisor " << d;
  }
}

// vLLM's reshape_and_cache_flash (NHD [blocks, 16, 8, 128]) and concat_and_cache_mla records,
// from the paged K/V reference: K = columns 0..1023 of row i, V = those of row 255 - i.
TEST(Golden, PagedKvReferenceReproducesVllmRecords) {
  const std::vector<uint16_t> in = golden_input();
  struct File { const char* name; KvCacheType type; bool per_head; };
  for (const File f : {File{"kv_flash_e4m3_tensor_records_256x2048.bin", KvCacheType::kFp8E4m3, false},
                       File{"kv_flash_e4m3_head_records_256x2048.bin", KvCacheType::kFp8E4m3, true},
                       File{"kv_flash_e5m2_tensor_records_256x2048.bin", KvCacheType::kFp8E5m2, false}}) {
    std::vector<uint16_t> v_rows(in.size());
    for (int r = 0; r < kGoldenRows; ++r)
      std::copy_n(&in[(kGoldenRows - 1 - r) * kGoldenCols], kGoldenCols, &v_rows[r * kGoldenCols]);
    std::vector<float> ks(8), vs(8);
    for (int h = 0; h < 8; ++h) {
      ks[h] = f.per_head ? 0.01f * static_cast<float>(h + 1) : 0.05f;
      vs[h] = f.per_head ? 0.03f / static_cast<float>(h + 1) : 0.02f;
    }
    std::vector<int64_t> slots(kGoldenRows);
    for (int i = 0; i < kGoldenRows; ++i) slots[i] = i;  // one record per slot, read in order
    std::vector<uint8_t> k_cache(kGoldenRows * 1024, 0xAB), v_cache(kGoldenRows * 1024, 0xAB);
    const layout::KvStrides st = layout::kv_nhd_strides(16, 8, 128);
    PagedKvParams p;
    p.batch = {kGoldenRows, nullptr, nullptr};
    p.slots = {slots.data(), SlotType::kInt64};
    p.num_heads = 8;
    p.cache_type = f.type;
    p.num_pages = kGoldenRows / 16;
    p.page_size = 16;
    p.k = {in.data(), kGoldenCols, 128, 128};
    p.v = {v_rows.data(), kGoldenCols, 128, 128};
    p.k_cache = {k_cache.data(), st.page, st.entry, st.head, ks.data(), f.per_head ? 1 : 0};
    p.v_cache = {v_cache.data(), st.page, st.entry, st.head, vs.data(), f.per_head ? 1 : 0};
    reference::store_paged_kv(p);
    std::vector<uint8_t> records;
    for (int r = 0; r < kGoldenRows; ++r) {
      records.insert(records.end(), k_cache.begin() + r * 1024, k_cache.begin() + (r + 1) * 1024);
      records.insert(records.end(), v_cache.begin() + r * 1024, v_cache.begin() + (r + 1) * 1024);
    }
    EXPECT_TRUE(bytes_equal(read_golden<uint8_t>(f.name, 256 * 2048), records, f.name));
  }
  std::vector<int64_t> slots(kGoldenRows);
  for (int i = 0; i < kGoldenRows; ++i) slots[i] = i;
  std::vector<uint8_t> cache(kGoldenRows * 576, 0xAB);
  const float scale = 0.04f;
  const layout::KvStrides st = layout::kv_mla_row_strides(16);
  PagedKvParams p;
  p.batch = {kGoldenRows, nullptr, nullptr};
  p.slots = {slots.data(), SlotType::kInt64};
  p.cache_type = KvCacheType::kFp8E4m3;
  p.num_pages = kGoldenRows / 16;
  p.page_size = 16;
  p.k = {in.data(), kGoldenCols, 0, layout::kMlaKvcDim};
  p.v = {in.data() + layout::kMlaKvcDim, kGoldenCols, 0, 64};
  p.k_cache = {cache.data(), st.page, st.entry, st.head, &scale, 0};
  p.v_cache = {cache.data() + layout::kMlaKvcDim, st.page, st.entry, st.head, &scale, 0};
  reference::store_paged_kv(p);
  EXPECT_TRUE(bytes_equal(read_golden<uint8_t>("mla_fp8_tensor_records_256x576.bin", 256 * 576),
                          cache, "vLLM concat_and_cache_mla fp8"));
}

TEST(E5m2Reference, HandWorkedValues) {
  EXPECT_EQ(reference::e5m2_from_float(1.0f), 0x3c);
  EXPECT_EQ(reference::e5m2_from_float(-1.0f), 0xbc);
  EXPECT_EQ(reference::e5m2_from_float(57344.0f), 0x7b);
  EXPECT_EQ(reference::e5m2_from_float(1e9f), 0x7b);
  EXPECT_EQ(reference::e5m2_from_float(-INFINITY), 0xfb);
  EXPECT_EQ(reference::e5m2_from_float(NAN), 0x7f);
  EXPECT_EQ(reference::e5m2_from_float(0x1p-16f), 0x01);   // smallest subnormal
  EXPECT_EQ(reference::e5m2_from_float(0x1p-17f), 0x00);   // a tie: to even (0)
  EXPECT_EQ(reference::e5m2_from_float(0x1.8p-17f), 0x01);
  EXPECT_EQ(reference::e5m2_from_float(-0.0f), 0x80);
  EXPECT_EQ(reference::e5m2_from_float(1.125f), 0x3c);      // tie 1.0 / 1.25: to even
  EXPECT_EQ(reference::e5m2_from_float(1.375f), 0x3e);      // tie 1.25 / 1.5: to even (1.5)
  EXPECT_EQ(reference::fp16_bits_to_float(0x3c00), 1.0f);
  EXPECT_EQ(reference::fp16_bits_to_float(0x0001), 0x1p-24f);
  EXPECT_EQ(reference::fp16_bits_to_float(0xfbff), -65504.0f);
}

// ---- the reference stores follow the guard ----------------------------------------------
TEST(ReferenceStore, Bf16GuardAndDiagnostics) {
  const int64_t b = 6, d = 8, slots_n = 8;
  std::vector<uint16_t> k(b * d);
  for (size_t i = 0; i < k.size(); ++i) k[i] = static_cast<uint16_t>(i + 1);
  std::vector<int64_t> slots = {2, -1, 0, 9, 5, 4};  // 0 reserved, 9 past capacity
  std::vector<uint16_t> cache(slots_n * d, 0xabab);
  int32_t n = 5;  // row 5 is padding
  Diagnostics diag{};
  IndexKBf16Params p;
  p.batch = {b, &n, &diag};
  p.slots = {slots.data(), SlotType::kInt64, 0};
  p.k = k.data();
  p.k_row_stride = d;
  p.cache = cache.data();
  p.cache_row_stride = d;
  p.num_slots = slots_n;
  p.head_dim = d;
  reference::store_index_k_bf16(p);
  for (int64_t s = 0; s < slots_n; ++s) {
    for (int64_t c = 0; c < d; ++c) {
      const uint16_t want = s == 2 ? k[0 * d + c] : s == 5 ? k[4 * d + c] : 0xabab;
      EXPECT_EQ(cache[s * d + c], want) << "slot " << s;
    }
  }
  EXPECT_EQ(diag.out_of_range_slots, 1u);
  EXPECT_EQ(diag.negative_token_counts, 0u);
  n = -3;
  reference::store_index_k_bf16(p);
  EXPECT_EQ(diag.negative_token_counts, 1u);
  EXPECT_EQ(diag.out_of_range_slots, 1u);  // nothing is real at n <= 0
}

// The RoPE reference on the pair worked in docs/layouts.md: bf16 x = 1.5 (d 0), y = 0.3125 (d 8)
// at a position whose pair-0 cos and sin are 0.6 and 0.8 (fp32 cache), NeoX, D = 16, one head,
// an auto NHD cache; Q (one head) holds the same values and is rotated in place. A second row
// with a position past the cache writes nothing and is counted.
TEST(RopeReference, OneBf16PairByHandAndAnOutOfRangePosition) {
  for (const RopeRounding rounding : {RopeRounding::kInputType, RopeRounding::kFp32}) {
    std::vector<uint16_t> k(2 * 16, 0), q(2 * 16, 0);
    k[0] = q[0] = 0x3fc0;  // 1.5
    k[8] = q[8] = 0x3ea0;  // 0.3125
    k[16] = q[16] = 0x3f80;
    std::vector<float> cos_sin(16, 0.0f);
    cos_sin[0] = 0.6f;
    cos_sin[8] = 0.8f;
    const std::vector<int64_t> positions = {0, 1};
    const std::vector<int64_t> slots = {3, 4};
    std::vector<uint16_t> cache(16 * 16, 0xabab);
    Diagnostics diagnostics{};
    const int32_t count = 2;
    PagedKvParams p;
    p.batch = {2, &count, &diagnostics};
    p.slots = {slots.data(), SlotType::kInt64};
    p.num_heads = 1;
    p.num_pages = 1;
    p.page_size = 16;
    p.k = {k.data(), 16, 16, 16};
    const layout::KvStrides nhd = layout::kv_nhd_strides(16, 1, 16);
    p.k_cache = {cache.data(), nhd.page, nhd.entry, nhd.head};
    p.rope.positions = positions.data();
    p.rope.cos_sin_cache = cos_sin.data();
    p.rope.max_position = 1;
    p.rope.rotary_dim = 16;
    p.rope.rounding = rounding;
    p.rope.num_query_heads = 1;
    p.rope.query = q.data();
    p.rope.query_token_stride = 16;
    p.rope.query_head_stride = 16;
    reference::store_paged_kv(p);
    const uint16_t x = rounding == RopeRounding::kInputType ? 0x3f27 : 0x3f26;
    EXPECT_EQ(cache[3 * 16 + 0], x);
    EXPECT_EQ(cache[3 * 16 + 8], 0x3fb2);
    EXPECT_EQ(cache[3 * 16 + 1], 0);  // 0 cos - 0 sin
    EXPECT_EQ(q[0], x);
    EXPECT_EQ(q[8], 0x3fb2);
    EXPECT_EQ(cache[4 * 16], 0xabab) << "position 1 is past a one-position cache";
    EXPECT_EQ(q[16], 0x3f80);
    EXPECT_EQ(diagnostics.out_of_range_positions, 1u);
    EXPECT_EQ(diagnostics.out_of_range_slots, 0u);
  }
}

// fused_store_cache with RoPE: the same pair in a V4 row's RoPE part (GPT-J, DeepSeek's style)
// and in Q's second head; a row past the cos/sin cache stores no record and rotates nothing.
TEST(RopeReference, MlaV4RowPairByHandAndAnOutOfRangePosition) {
  constexpr int32_t kP = 16;
  const layout::MlaLayoutInfo& v4 = layout::mla_layout(MlaLayout::kV4);
  for (const RopeRounding rounding : {RopeRounding::kInputType, RopeRounding::kFp32}) {
    std::vector<uint16_t> nope(2 * 448, 0x3f80), rope(2 * 64, 0), q(2 * 2 * 64, 0);
    std::vector<uint16_t> key_out(2 * 64, 0x7777);
    rope[0] = rope[64] = q[64] = q[3 * 64] = 0x3fc0;     // 1.5: row 0 and 1, head 1
    rope[1] = rope[65] = q[65] = q[3 * 64 + 1] = 0x3ea0;  // 0.3125
    std::vector<float> cos_sin(64, 0.0f);
    cos_sin[0] = 0.6f;
    cos_sin[32] = 0.8f;
    const std::vector<int64_t> positions = {0, 1};
    const std::vector<int64_t> slots = {3, 4};
    const int64_t stride = layout::min_page_stride(MlaLayout::kV4, kP);
    std::vector<uint8_t> cache(static_cast<size_t>(stride), 0xab);
    Diagnostics diagnostics{};
    const int32_t count = 2;
    FusedStoreParams p;
    p.batch = {2, &count, &diagnostics};
    p.kv_slots = {slots.data(), SlotType::kInt64};
    p.nope = nope.data();
    p.nope_row_stride = 448;
    p.rope = rope.data();
    p.rope_row_stride = 64;
    p.kv_cache = {MlaLayout::kV4, cache.data(), 1, kP, stride, ScaleRule::kPow2};
    RotaryEmbedding& r = p.rotary;
    r.positions = positions.data();
    r.cos_sin_cache = cos_sin.data();
    r.max_position = 1;
    r.rotary_dim = 64;
    r.style = RopeStyle::kGptj;
    r.rounding = rounding;
    r.num_query_heads = 2;
    r.query = q.data();
    r.query_token_stride = 128;
    r.query_head_stride = 64;
    r.key_out = key_out.data();
    r.key_out_token_stride = 64;
    reference::fused_store_cache(p);
    const uint16_t x = rounding == RopeRounding::kInputType ? 0x3f27 : 0x3f26;
    uint16_t stored[2];
    std::memcpy(stored, cache.data() + layout::data_offset(v4.rows, 0, 3, stride) +
                            v4.rope_in_record, sizeof stored);
    EXPECT_EQ(stored[0], x);
    EXPECT_EQ(stored[1], 0x3fb2);
    EXPECT_EQ(q[64], x);
    EXPECT_EQ(q[65], 0x3fb2);
    EXPECT_EQ(q[0], 0) << "0 cos - 0 sin";
    EXPECT_EQ(key_out[0], x);
    EXPECT_EQ(key_out[1], 0x3fb2);
    EXPECT_EQ(key_out[2], 0);
    EXPECT_EQ(rope[0], 0x3fc0) << "the input is not rotated in place without key_out = rope";
    // Row 1, position 1 of a one-position cache: no record, Q and key_out as they were.
    EXPECT_EQ(cache[layout::data_offset(v4.rows, 0, 4, stride)], 0xab);
    EXPECT_EQ(q[3 * 64], 0x3fc0);
    EXPECT_EQ(key_out[64], 0x7777);
    EXPECT_EQ(diagnostics.out_of_range_positions, 1u);
    EXPECT_EQ(diagnostics.out_of_range_slots, 0u);
  }
}

}  // namespace
}  // namespace cachestore::test
