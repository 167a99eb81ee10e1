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
#include <cuda_fp8.h>

#include "detail/scale_rules.h"
#include "gpu_support.cuh"
#include "kernels/common.cuh"
#include "reference/conversions.h"

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

enum class Conversion { kE4m3, kUe8m0 };
void PrintTo(Conversion c, std::ostream* os) { *os << (c == Conversion::kE4m3 ? "e4m3" : "ue8m0"); }

__device__ __forceinline__ uint8_t device_conversion(Conversion which, float x) {
  if (which == Conversion::kE4m3)
    return static_cast<uint8_t>(__nv_cvt_float2_to_fp8x2(make_float2(x, x), __NV_SATFINITE, __NV_E4M3) & 0xff);
  return __nv_cvt_float_to_e8m0(x, __NV_SATFINITE, cudaRoundPosInf);
}

__host__ __device__ inline uint8_t reference_conversion(Conversion which, float x) {
  return which == Conversion::kE4m3 ? reference::e4m3_from_float(x)
                                    : reference::ue8m0_from_float_rp_satfinite(x);
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
                         ::testing::Values(Conversion::kE4m3, Conversion::kUe8m0),
                         [](const auto& info) {
                           return info.param == Conversion::kE4m3 ? "E4m3" : "Ue8m0";
                         });

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
      const float fast = rule == 0 ? kernels::markstein_quotient<false>(x, s, __frcp_rn(s))
                       : kernels::markstein_applies(s)
                           ? kernels::markstein_quotient<false>(x, s, __frcp_rn(s))
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

}  // namespace
}  // namespace cachestore::test
