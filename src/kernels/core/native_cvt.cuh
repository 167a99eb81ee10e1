// Whether this image has Blackwell's native short-type conversions (cvt.rn.satfinite.e2m1x2.f32,
// cvt.rp.satfinite.ue8m0x2.f32): the condition under which cuda_fp4.h and cuda_fp8.h emit them
// (sm_100a/f and the other family-specific targets), so that __nv_cvt_float2_to_fp4x2 and
// __nv_cvt_float_to_e8m0 are the instructions and never the headers' emulations.
#pragma once

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FAMILY_SPECIFIC__) && __CUDA_ARCH__ >= 1000
#define CACHESTORE_NATIVE_SHORT_CVT 1
#else
#define CACHESTORE_NATIVE_SHORT_CVT 0
#endif
