// The device conversions against the reference encoders (test/reference/conversions.h), over
// every fp32 bit pattern: all exponents, mantissa boundaries and ties, zeros, subnormals,
// values past 448, NaN and Inf.
//  - e4m3: cuda_fp8.h's __nv_cvt_float2_to_fp8x2, i.e. the hardware cvt.rn.satfinite.e4m3x2
//    on sm_89+, which every quantizing kernel uses.
//  - UE8M0: cuda_fp8.h's __nv_cvt_float_to_e8m0 (rp, satfinite) as compiled for this GPU: on
//    sm_90 that is the software emulation of Blackwell's cvt.rp.satfinite.ue8m0x2.f32, which
//    the sm_100a image replaces with the native instruction. Checked against the PTX ISA's
//    definition of that instruction as written in the reference.
// The reference runs on the device for the exhaustive sweep; a sample is also compared with the
// host-compiled reference, so host and device builds of it are shown to agree.
#include <cuda_fp4.h>
#include <thrust/sequence.h>
#include <cuda_fp8.h>

#include "detail/scale_rules.h"
#include "gpu_support.cuh"
#include "kernels/core/bf16_values.cuh"
#include "kernels/core/fp4.cuh"
#include "kernels/core/rope.cuh"
#include "kernels/core/ue8m0.cuh"
#include "reference/conversions.h"
#include "reference/reference.h"

namespace cachestore::test {
namespace {

struct Mismatches {
  unsigned long long count;
  uint32_t first[16];

  // The first inputs that mismatched, each spelled by `format` (printf, one uint32 argument).
  template <typename Format>
  std::string first_inputs(Format format) const {
    std::string out;
    for (unsigned long long i = 0; i < std::min<unsigned long long>(count, 16); ++i) {
      char buf[32];
      format(buf, sizeof buf, first[i]);
      out += buf;
    }
    return out;
  }
};

//  - e2m1, ties to even and toward zero: the kernels' software encoder (e2m1_code_software),
//    which every fp4 store runs on sm_90 (the sm_100a image uses the native
//    cvt.rn.satfinite.e2m1x2.f32 for ties to even), against the PTX ISA's definition.
//  - e2m1 by cuda_fp4.h's __nv_cvt_float2_to_fp4x2 (rn) as compiled here: NVIDIA's software
//    emulation of that instruction, so the reference and the native path agree too.
//  - the V41 scale byte from amax's bits (detail::v41_scale_byte) against docs/layouts.md's formula,
//    for every non-negative amax; the same for the index-K pow2 / V4 byte and the V3.2 pow2 byte
//    (detail::v4_scale_byte, v32_pow2_scale_byte: the sm_90 image's path, kernels::pow2_scale_byte).
//  - the kernels' UE8M0 round-up of a scale (kernels::ue8m0_round_up: from the bits on sm_90),
//    over its domain [FLT_MIN, +Inf]: each pattern x is mapped to max(|x|, FLT_MIN).
//  - NVFP4's code of a product from its bits (kernels::nvfp4_code_of_product, the per-value
//    path): e2m1 ties to even with a NaN giving 0.
//  - NVFP4's byte of two products (kernels::nvfp4_code_pair_bits, the sm_90 block path) of x and
//    -x, both nibbles and both sign positions: a NaN flags the pair (its block then takes the
//    per-value path, whose byte is 0).
enum class Conversion { kE4m3, kUe8m0, kE2m1Even, kE2m1TowardZero, kE2m1CudaFp4, kV41Scale,
                        kUe8m0Scale, kV4Scale, kV32Pow2Scale, kNvfp4Code, kNvfp4Pair };
const char* conversion_name(Conversion c) {
  switch (c) {
    case Conversion::kE4m3: return "E4m3";
    case Conversion::kUe8m0: return "Ue8m0";
    case Conversion::kE2m1Even: return "E2m1TiesToEven";
    case Conversion::kE2m1TowardZero: return "E2m1TiesTowardZero";
    case Conversion::kE2m1CudaFp4: return "E2m1CudaFp4Header";
    case Conversion::kV41Scale: return "V41ScaleByte";
    case Conversion::kUe8m0Scale: return "Ue8m0OfScale";
    case Conversion::kV4Scale: return "V4ScaleByte";
    case Conversion::kV32Pow2Scale: return "V32Pow2ScaleByte";
    case Conversion::kNvfp4Code: return "Nvfp4CodeOfProduct";
    case Conversion::kNvfp4Pair: return "Nvfp4PairOfProducts";
  }
  return "?";
}
void PrintTo(Conversion c, std::ostream* os) { *os << conversion_name(c); }

// Any pattern mapped into the domain of a scale, [FLT_MIN, +Inf]: max(|x|, FLT_MIN), NaN to
// FLT_MIN (spelled out: the host compiler's fmaxf need not ignore a NaN).
__host__ __device__ inline float scale_domain(float x) {
  const float a = fabsf(x);
  return a != a || a < FLT_MIN ? FLT_MIN : a;
}

__device__ __forceinline__ uint8_t device_conversion(Conversion which, float x) {
  switch (which) {
    case Conversion::kE4m3:
      return static_cast<uint8_t>(
          __nv_cvt_float2_to_fp8x2(make_float2(x, x), __NV_SATFINITE, __NV_E4M3) & 0xff);
    case Conversion::kUe8m0: return __nv_cvt_float_to_e8m0(x, __NV_SATFINITE, cudaRoundPosInf);
    case Conversion::kE2m1Even: return kernels::e2m1_code_software(x, Fp4Ties::kToEven);
    case Conversion::kE2m1TowardZero: return kernels::e2m1_code_software(x, Fp4Ties::kTowardZero);
    case Conversion::kE2m1CudaFp4:
      return __nv_cvt_float2_to_fp4x2(make_float2(x, 0.0f), __NV_E2M1, cudaRoundNearest) & 0xf;
    case Conversion::kV41Scale: return isnan(x) ? 0 : detail::v41_scale_byte(fabsf(x));
    case Conversion::kUe8m0Scale: return kernels::ue8m0_round_up(scale_domain(x));
    case Conversion::kV4Scale: return isnan(x) ? 0 : detail::v4_scale_byte(fabsf(x));
    case Conversion::kV32Pow2Scale: return isnan(x) ? 0 : detail::v32_pow2_scale_byte(fabsf(x));
    case Conversion::kNvfp4Code: return kernels::nvfp4_code_of_product(x);
    case Conversion::kNvfp4Pair: {
      uint32_t nan = 0;
      const uint32_t pair = kernels::nvfp4_code_pair_bits(x, -x, nan);
      return (nan & kernels::kNvfp4NanBit) != 0 ? 0 : static_cast<uint8_t>(pair);
    }
  }
  return 0;
}

__host__ __device__ inline uint8_t reference_conversion(Conversion which, float x) {
  switch (which) {
    case Conversion::kE4m3: return reference::e4m3_from_float(x);
    case Conversion::kUe8m0: return reference::ue8m0_from_float_rp_satfinite(x);
    case Conversion::kE2m1Even:
    case Conversion::kE2m1CudaFp4: return reference::e2m1_from_float(x, true);
    case Conversion::kE2m1TowardZero: return reference::e2m1_from_float(x, false);
    case Conversion::kV41Scale: return x != x ? 0 : reference::v41_scale_byte_formula(fabsf(x));
    case Conversion::kUe8m0Scale: return reference::ue8m0_from_float_rp_satfinite(scale_domain(x));
    case Conversion::kV4Scale: return x != x ? 0 : reference::v4_scale_byte_formula(fabsf(x));
    case Conversion::kV32Pow2Scale:
      return x != x ? 0 : reference::v32_pow2_scale_byte_formula(fabsf(x));
    case Conversion::kNvfp4Code: return x != x ? 0 : reference::e2m1_from_float(x, true);
    case Conversion::kNvfp4Pair:
      return x != x ? 0
                    : static_cast<uint8_t>(reference::e2m1_from_float(x, true) |
                                           reference::e2m1_from_float(-x, true) << 4);
  }
  return 0;
}

// Bit patterns start + i * stride for i < count (stride 1: every pattern).
__global__ void compare_kernel(Conversion which, uint64_t start, uint64_t stride, uint64_t count,
                               Mismatches* out) {
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < count;
       i += uint64_t{gridDim.x} * blockDim.x) {
    const uint32_t bits = static_cast<uint32_t>(start + i * stride);
    const float x = __uint_as_float(bits);
    if (device_conversion(which, x) != reference_conversion(which, x)) {
      const unsigned long long k = atomicAdd(&out->count, 1ull);
      if (k < 16) out->first[k] = bits;
    }
  }
}

__global__ void sample_kernel(Conversion which, const uint32_t* bits, uint8_t* out, int count) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < count) out[i] = device_conversion(which, __uint_as_float(bits[i]));
}

class ConversionTest : public GpuTest, public ::testing::WithParamInterface<Conversion> {};

INSTANTIATE_TEST_SUITE_P(Formats, ConversionTest,
                         ::testing::Values(Conversion::kE4m3, Conversion::kUe8m0,
                                           Conversion::kE2m1Even, Conversion::kE2m1TowardZero,
                                           Conversion::kE2m1CudaFp4, Conversion::kV41Scale,
                                           Conversion::kUe8m0Scale, Conversion::kV4Scale,
                                           Conversion::kV32Pow2Scale, Conversion::kNvfp4Code,
                                           Conversion::kNvfp4Pair),
                         [](const auto& info) { return conversion_name(info.param); });

TEST_P(ConversionTest, EveryFloatMatchesReference) {
  // Under a sanitizer every 4099th pattern (a prime stride covers all exponents).
  const uint64_t stride = sanitizer_run() ? 4099 : 1;
  const uint64_t count = ((uint64_t{1} << 32) + stride - 1) / stride;
  thrust::device_vector<Mismatches> result(1, Mismatches{});
  compare_kernel<<<4096, 256>>>(GetParam(), 0, stride, count,
                                thrust::raw_pointer_cast(result.data()));
  CUDA_ASSERT(cudaGetLastError());
  CUDA_ASSERT(cudaDeviceSynchronize());
  const Mismatches m = result[0];
  EXPECT_EQ(m.count, 0u) << "first mismatching inputs:" << m.first_inputs([](char* buf, size_t n, uint32_t v) {
    std::snprintf(buf, n, " %08x", v);
  });
  RecordProperty("patterns_checked", std::to_string(count));
}

TEST_P(ConversionTest, HostCompiledReferenceAgrees) {
  // Every special class, then random patterns: device conversion vs the host-compiled reference.
  std::vector<uint32_t> bits = {0x00000000, 0x80000000, 0x00000001, 0x003fffff, 0x00400000,
                                0x00400001, 0x007fffff, 0x00800000, 0x3f800000, 0x3f880000,
                                0x3f980000, 0x43e00000, 0x43e80000, 0x43f00000, 0x7f000000,
                                0x7f000001, 0x7f7fffff, 0x7f800000, 0xff800000, 0x7fc00000,
                                0xffc00000, 0x7f800001, 0x3a800000, 0x3a000000, 0x3ac00000};
  for (uint32_t e = 0; e < 256; ++e)  // each exponent: mantissa 0, tie points, all ones
    for (uint32_t m : {0x0u, 0x80000u, 0x100000u, 0x180000u, 0x7fffffu, 0x400000u})
      for (uint32_t s : {0u, 0x80000000u}) bits.push_back(s | (e << 23) | m);
  for (int i = 0; i < (1 << 20); ++i) bits.push_back(static_cast<uint32_t>(rng_()));
  thrust::device_vector<uint32_t> d_bits(bits.begin(), bits.end());
  thrust::device_vector<uint8_t> d_out(bits.size());
  sample_kernel<<<static_cast<unsigned>((bits.size() + 255) / 256), 256>>>(
      GetParam(), thrust::raw_pointer_cast(d_bits.data()), thrust::raw_pointer_cast(d_out.data()),
      static_cast<int>(bits.size()));
  CUDA_ASSERT(cudaGetLastError());
  std::vector<uint8_t> out(bits.size());
  thrust::copy(d_out.begin(), d_out.end(), out.begin());
  int mismatches = 0;
  for (size_t i = 0; i < bits.size(); ++i) {
    float x;
    std::memcpy(&x, &bits[i], 4);
    if (out[i] != reference_conversion(GetParam(), x) && mismatches++ < 8)
      ADD_FAILURE() << std::hex << "input 0x" << bits[i] << ": device 0x" << int{out[i]}
                    << ", host reference 0x" << int{reference_conversion(GetParam(), x)};
  }
  EXPECT_EQ(mismatches, 0);
}

// The kernels' branch-free quotient (Bf16Vals::to_e4m3_divided) against IEEE division, for
// every pair the amax rules can produce: x any bf16 pattern, s the index-K or V3.2 amax-rule
// scale of any bf16 amax a >= |x| (a = +Inf included), NaN x included. What must agree is the
// e4m3 byte stored; the fp32 quotients must agree too wherever e4m3 can tell them apart
// (|x / s| >= 2^-10, half of e4m3's smallest subnormal).
__global__ void quotient_kernel(uint32_t amax_stride, Mismatches* out) {
  const uint32_t a_bits = (blockIdx.x * amax_stride) & 0xffffu;
  if (a_bits > 0x7f80u) return;  // positive bf16 amax values only (NaN never is the amax)
  const float amax = detail::bf16_bits_to_float(static_cast<uint16_t>(a_bits));
  const float scales[2] = {detail::index_k_scale_base(amax), detail::v32_amax_scale(amax)};
  for (uint32_t x_bits = threadIdx.x; x_bits < 65536; x_bits += blockDim.x) {
    const float x = detail::bf16_bits_to_float(static_cast<uint16_t>(x_bits));
    if (!(fabsf(x) <= amax) && !isnan(x)) continue;
    for (int rule = 0; rule < 2; ++rule) {
      const float s = scales[rule];
      // What fp8_divided computes for each rule's scales (ScaleSource).
      const float fast = rule == 0 ? kernels::markstein_quotient<false>(x, s, kernels::reciprocal_rn(s))
                       : kernels::markstein_applies(s)
                           ? kernels::markstein_quotient<false>(x, s, kernels::reciprocal_rn(s))
                           : __fdiv_rn(x, s);
      const float ieee = __fdiv_rn(x, s);
      const auto e4m3 = [](float q) {
        return __nv_cvt_float2_to_fp8x2(make_float2(q, q), __NV_SATFINITE, __NV_E4M3) & 0xff;
      };
      const bool visible = !(fabsf(ieee) < 0x1p-10f);
      const bool same = e4m3(fast) == e4m3(ieee) &&
                        (!visible || (isnan(fast) && isnan(ieee)) ||
                         __float_as_uint(fast) == __float_as_uint(ieee));
      if (!same) {
        const unsigned long long k = atomicAdd(&out->count, 1ull);
        if (k < 16) out->first[k] = (a_bits << 16) | x_bits;
      }
    }
  }
}

TEST_F(GpuTest, BranchFreeQuotientMatchesIeeeDivisionOnEveryScalePair) {
  const uint32_t stride = sanitizer_run() ? 257 : 1;  // 257: every 257th amax pattern
  thrust::device_vector<Mismatches> result(1, Mismatches{});
  quotient_kernel<<<65536 / stride + 1, 256>>>(stride, thrust::raw_pointer_cast(result.data()));
  CUDA_ASSERT(cudaGetLastError());
  CUDA_ASSERT(cudaDeviceSynchronize());
  const Mismatches m = result[0];
  EXPECT_EQ(m.count, 0u) << "first mismatching (amax, x) bf16 pairs:"
                         << m.first_inputs([](char* buf, size_t n, uint32_t v) {
                              std::snprintf(buf, n, " a=%04x,x=%04x", v >> 16, v & 0xffff);
                            });
}

// The RoPE stores' packed 16-bit arithmetic (kernels::PackedPair: two values a word, for
// kInputType rounding) against the rule it replaces, each fp32 product, sum and difference
// rounded to the type: every pair (a, b) of bf16 and of fp16 bit patterns, NaN, Inf, zeros and
// subnormals included, in both halves of the word. What must agree is the 16-bit result.
template <KvDataType kIn>
__device__ uint16_t rounded_to(float x) {
  return kIn == KvDataType::kBf16 ? __bfloat16_as_ushort(__float2bfloat16_rn(x))
                                  : __half_as_ushort(__float2half_rn(x));
}

template <KvDataType kIn>
__device__ bool packed_pair_matches(uint16_t a, uint16_t b) {
  using P = kernels::PackedPair<kIn>;
  const float fa = kernels::kv_value<kIn>(a), fb = kernels::kv_value<kIn>(b);
  const uint32_t ab = a | uint32_t{b} << 16, ba = b | uint32_t{a} << 16;
  const auto both = [](uint16_t lo, uint16_t hi) { return lo | uint32_t{hi} << 16; };
  const auto r = [](float x) { return rounded_to<kIn>(x); };
  return P::mul(ab, ba) == both(r(__fmul_rn(fa, fb)), r(__fmul_rn(fb, fa))) &&
         P::add(ab, ba) == both(r(__fadd_rn(fa, fb)), r(__fadd_rn(fb, fa))) &&
         P::sub(ab, ba) == both(r(__fsub_rn(fa, fb)), r(__fsub_rn(fb, fa)));
}

__global__ void packed_pair_kernel(uint32_t stride, Mismatches* bf16, Mismatches* fp16) {
  const uint32_t a = (blockIdx.x * stride) & 0xffffu;
  for (uint32_t b = threadIdx.x; b < 65536; b += blockDim.x) {
    const uint32_t pair = a << 16 | b;
    if (!packed_pair_matches<KvDataType::kBf16>(a, b)) {
      const unsigned long long k = atomicAdd(&bf16->count, 1ull);
      if (k < 16) bf16->first[k] = pair;
    }
    if (!packed_pair_matches<KvDataType::kFp16>(a, b)) {
      const unsigned long long k = atomicAdd(&fp16->count, 1ull);
      if (k < 16) fp16->first[k] = pair;
    }
  }
}

TEST_F(GpuTest, PackedRotationArithmeticMatchesTheFp32RuleForEveryPair) {
  const uint32_t stride = sanitizer_run() ? 257 : 1;  // 257: every 257th first operand
  thrust::device_vector<Mismatches> result(2, Mismatches{});
  packed_pair_kernel<<<65536 / stride + 1, 256>>>(stride, thrust::raw_pointer_cast(result.data()),
                                                  thrust::raw_pointer_cast(result.data()) + 1);
  CUDA_ASSERT(cudaGetLastError());
  CUDA_ASSERT(cudaDeviceSynchronize());
  const auto pair = [](char* buf, size_t n, uint32_t v) {
    std::snprintf(buf, n, " a=%04x,b=%04x", v >> 16, v & 0xffff);
  };
  const Mismatches bf16 = result[0], fp16 = result[1];
  EXPECT_EQ(bf16.count, 0u) << "bf16 pairs where packed arithmetic differs:"
                            << bf16.first_inputs(pair);
  EXPECT_EQ(fp16.count, 0u) << "fp16 pairs where packed arithmetic differs:"
                            << fp16.first_inputs(pair);
}

// The kernels' branch-free reciprocal (kernels::reciprocal_rn) against rcp.rn.f32 for every s of
// its domain, [FLT_MIN, 2^126) and +Inf, and the scale formulas as compiled for the device
// (division by 448 and 6 without a division instruction: detail::quotient_by_constant) against
// the same formulas written with IEEE division, for every non-negative fp32 amax (+Inf included).
__global__ void scale_arithmetic_kernel(uint32_t stride, Mismatches* reciprocal,
                                        Mismatches* formulas) {
  const uint32_t count = 0x7f800000u / stride + 1;
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += gridDim.x * blockDim.x) {
    const uint32_t bits = i * stride;
    const float a = __uint_as_float(bits);
    if (a >= FLT_MIN && (a < 0x1p126f || a == INFINITY) &&
        __float_as_uint(kernels::reciprocal_rn(a)) != __float_as_uint(__frcp_rn(a))) {
      const unsigned long long k = atomicAdd(&reciprocal->count, 1ull);
      if (k < 16) reciprocal->first[k] = bits;
    }
    const float by448 = __fdiv_rn(a, 448.0f), by6 = __fdiv_rn(a, 6.0f);
    const uint32_t u = __float_as_uint(fmaxf(by6, 1e-4f));
    const uint32_t e = (u >> 23) + ((u & 0x7fffffu) != 0 ? 1u : 0u);
    const bool same =
        detail::index_k_scale_base(a) == __fdiv_rn(fmaxf(a, 1e-4f), 448.0f) &&
        detail::v32_pow2_scale_base(a) == fmaxf(by448, 1e-4f) &&
        detail::v32_amax_scale(a) == fmaxf(by448, FLT_MIN) &&
        detail::v41_fp4_scale_input(a) == fminf(fmaxf(by6, 0x1p-9f), 448.0f) &&
        detail::index_k_fp4_scale_byte(a) == (e < 1u ? 1u : e > 254u ? 254u : e);
    if (!same) {
      const unsigned long long k = atomicAdd(&formulas->count, 1ull);
      if (k < 16) formulas->first[k] = bits;
    }
  }
}

TEST_F(GpuTest, ReciprocalAndScaleFormulasMatchIeeeForEveryInput) {
  const uint32_t stride = sanitizer_run() ? 4099 : 1;
  thrust::device_vector<Mismatches> result(2, Mismatches{});
  scale_arithmetic_kernel<<<4096, 256>>>(stride, thrust::raw_pointer_cast(result.data()),
                                         thrust::raw_pointer_cast(result.data()) + 1);
  CUDA_ASSERT(cudaGetLastError());
  CUDA_ASSERT(cudaDeviceSynchronize());
  const auto hex = [](char* buf, size_t n, uint32_t v) { std::snprintf(buf, n, " %08x", v); };
  const Mismatches reciprocal = result[0], formulas = result[1];
  EXPECT_EQ(reciprocal.count, 0u) << "reciprocal_rn differs from rcp.rn at:"
                                  << reciprocal.first_inputs(hex);
  EXPECT_EQ(formulas.count, 0u) << "a scale formula differs from IEEE division at amax:"
                                << formulas.first_inputs(hex);
}

// The fp4 stores' encoder (Bf16Vals::to_e2m1: bf16 thresholds, the indexer's power-of-two
// candidates for ties to even, or per value for NaN / Inf vectors) against the reference e2m1 of the IEEE quotient, over its whole domain: every bf16 x
// (8 per thread, as a kernel lane holds them) against every scale the fp4 layouts produce, each
// e4m3 scale of V41_FP4 (bytes 1..0x7e) and each power of two of the indexer (bytes 1..254),
// both tie rules.
__global__ void e2m1_encoder_kernel(const uint16_t* all_bf16, Mismatches* out) {
  const int config = blockIdx.y;  // 0..125: V41_FP4 byte config + 1; then indexer bytes x ties
  float scale, inverse = 0.0f;  // the indexer's exact 1 / scale, as its store passes it
  Fp4Ties ties = Fp4Ties::kToEven;
  if (config < 126) {
    scale = detail::e4m3_scale_to_float(static_cast<uint8_t>(config + 1));
  } else {
    const int k = config - 126;
    scale = detail::ue8m0_to_float(static_cast<uint8_t>(1 + k / 2));
    inverse = detail::ue8m0_reciprocal(static_cast<uint8_t>(1 + k / 2));
    ties = k % 2 == 0 ? Fp4Ties::kToEven : Fp4Ties::kTowardZero;
  }
  const uint32_t first = (blockIdx.x * blockDim.x + threadIdx.x) * 8;
  if (first >= 65536) return;
  auto x = kernels::Bf16Vals<8>::load<false>(all_bf16 + first);
  const uint32_t codes =
      x.to_e2m1(scale, ties, [scale](float v) { return __fdiv_rn(v, scale); }, inverse);
  for (int i = 0; i < 8; ++i) {
    const float v = detail::bf16_bits_to_float(static_cast<uint16_t>(first + i));
    const uint32_t want = reference::e2m1_from_float(__fdiv_rn(v, scale), ties == Fp4Ties::kToEven);
    if (((codes >> (4 * i)) & 0xfu) != want) {
      const unsigned long long k = atomicAdd(&out->count, 1ull);
      if (k < 16) out->first[k] = (static_cast<uint32_t>(config) << 16) | (first + i);
    }
  }
}

TEST_F(GpuTest, E2m1EncoderMatchesReferenceForEveryBf16AndScale) {
  thrust::device_vector<uint16_t> all(65536);
  thrust::sequence(all.begin(), all.end());
  thrust::device_vector<Mismatches> result(1, Mismatches{});
  e2m1_encoder_kernel<<<dim3(65536 / 8 / 256, 126 + 2 * 254), 256>>>(
      thrust::raw_pointer_cast(all.data()), thrust::raw_pointer_cast(result.data()));
  CUDA_ASSERT(cudaGetLastError());
  CUDA_ASSERT(cudaDeviceSynchronize());
  const Mismatches m = result[0];
  EXPECT_EQ(m.count, 0u) << "first mismatching (scale config, x) pairs:"
                         << m.first_inputs([](char* buf, size_t n, uint32_t v) {
                              std::snprintf(buf, n, " c=%u,x=%04x", v >> 16, v & 0xffff);
                            });
}

// NVFP4 blocks (kernels::nvfp4_block) against the host reference: random blocks of every
// magnitude under random global scales, with NaN, +-Inf, signed zeros, all-zero blocks and
// blocks whose scale is an e4m3 subnormal or rounds to 0. Beside them, the fact behind the NaN
// rule: FlashInfer's encoder takes the sign of x * out, and a NaN product on the device has no
// sign, so a negative NaN input is stored as +0 there too.
__global__ void nvfp4_block_kernel(const float* x, const float* g, uint8_t* out, int blocks,
                                   const float* probe, uint32_t* nan_product_signs) {
  const int b = blockIdx.x * blockDim.x + threadIdx.x;
  if (b == 0) {  // probe (from memory, so nothing folds): -NaN, 0.5, 0, -Inf
    *nan_product_signs = (signbit(probe[0] * probe[1]) ? 1u : 0u) |
                         (signbit(probe[0] * probe[2]) ? 2u : 0u) |
                         (signbit(probe[3] * probe[2]) ? 4u : 0u);
  }
  if (b >= blocks) return;
  float v[16];
  for (int i = 0; i < 16; ++i) v[i] = x[16 * b + i];
  const kernels::Nvfp4Block q = kernels::nvfp4_block(v, g[b]);
  memcpy(out + 9 * b, &q.codes, 8);
  out[9 * b + 8] = q.scale;
}

TEST_F(GpuTest, Nvfp4BlocksMatchReferenceWithSpecialValues) {
  constexpr int kBlocks = 1 << 16;
  std::vector<float> x(16 * kBlocks), g(kBlocks);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  const float specials[6] = {NAN, -NAN, INFINITY, -INFINITY, 0.0f, -0.0f};
  for (int b = 0; b < kBlocks; ++b) {
    const int e = static_cast<int>(rng_() % 60) - 30;  // block magnitudes 2^-30 .. 2^29
    for (int i = 0; i < 16; ++i)
      x[16 * b + i] = std::ldexp(unit(rng_) * 2.0f - 1.0f, e + static_cast<int>(rng_() % 4));
    if (b % 7 == 1) x[16 * b + rng_() % 16] = specials[rng_() % 6];
    if (b % 53 == 2)
      for (int i = 0; i < 16; ++i) x[16 * b + i] = (i % 3 == 0) ? -0.0f : 0.0f;
    g[b] = b % 97 == 3 ? (b % 2 ? 0.0f : -1.0f) : std::ldexp(1.0f + unit(rng_), -14 + static_cast<int>(rng_() % 18));
    if (b % 89 == 5) {  // sf * g below FLT_MIN's reach: out = +Inf, so 0 * out is NaN
      g[b] = FLT_MIN;
      for (int i = 0; i < 16; ++i)
        x[16 * b + i] = i % 5 == 0 ? 0.0f : std::ldexp(unit(rng_) * 2.0f - 1.0f, -130);
    }
  }
  thrust::device_vector<float> dx(x.begin(), x.end()), dg(g.begin(), g.end());
  thrust::device_vector<uint8_t> out(9 * kBlocks, 0xAB);
  thrust::device_vector<uint32_t> signs(1, 0xffffffffu);
  const std::vector<float> probe_host = {-NAN, 0.5f, 0.0f, -INFINITY};
  thrust::device_vector<float> probe(probe_host.begin(), probe_host.end());
  nvfp4_block_kernel<<<kBlocks / 256, 256>>>(thrust::raw_pointer_cast(dx.data()),
                                             thrust::raw_pointer_cast(dg.data()),
                                             thrust::raw_pointer_cast(out.data()), kBlocks,
                                             thrust::raw_pointer_cast(probe.data()),
                                             thrust::raw_pointer_cast(signs.data()));
  CUDA_ASSERT(cudaGetLastError());
  CUDA_ASSERT(cudaDeviceSynchronize());
  const std::vector<uint8_t> got(out.begin(), out.end());
  int mismatches = 0;
  for (int b = 0; b < kBlocks; ++b) {
    uint8_t want[9];
    reference::quantize_nvfp4_block(&x[16 * b], g[b], want, want + 8);
    if (std::memcmp(want, &got[9 * b], 9) != 0 && ++mismatches <= 5)
      ADD_FAILURE() << "block " << b << " (g = " << g[b] << "): scale " << int(got[9 * b + 8])
                    << " vs reference " << int(want[8]);
  }
  EXPECT_EQ(mismatches, 0);
  const uint32_t nan_signs = signs[0];
  EXPECT_EQ(nan_signs, 0u) << "a NaN product on this device kept a sign bit (bits " << nan_signs
                           << "): FlashInfer's encoder would store such a NaN as -0 (0x8)";
}

}  // namespace
}  // namespace cachestore::test
