// The baselines the DeepSeek rows stand beside: the lean naive bf16 scatter (x_naive's node),
// the naive fp8 composition an engine writes by hand, and the device-to-device copy.
#include "harness.cuh"
#include "naive_fp8.cuh"
#include "naive_scatter.cuh"

namespace cachestore::bench {
namespace {

thrust::device_vector<float>* g_naive_scale = nullptr;
thrust::device_vector<uint8_t>* g_naive_q = nullptr;

const Family kBaselines(
    {
        {0, "naive_bf16_scatter", 520, 128, false, nullptr, false, nullptr,
         [] { return pool().bf16_slots; },
         [](const Node& node) {
           return cuda_status(test::lean_naive_scatter(
               node.in, 128, node.slots, thrust::raw_pointer_cast(pool().bf16_cache.data()),
               node.n, 128, node.stream));
         }},
        {1, "naive_fp8_composition", 396, 128, false, nullptr, false, nullptr,
         [] { return pool().index_pages * kPage; },
         [](const Node& node) {
           const IndexKFp8Cache cache = pool().fp8(ScaleRule::kAmax);
           return cuda_status(naive_fp8_store(
               node.in, node.slots, static_cast<uint8_t*>(cache.data), node.n, 6,
               cache.page_stride_bytes, thrust::raw_pointer_cast(g_naive_scale->data()),
               thrust::raw_pointer_cast(g_naive_q->data()), node.stream));
         }},
        {2, "d2d_copy", 512, 128, false, nullptr, false, nullptr,
         [] { return pool().bf16_slots; },
         [](const Node& node) {
           return cuda_status(cudaMemcpyAsync(thrust::raw_pointer_cast(pool().copy_dst.data()),
                                              node.in, node.n * 256, cudaMemcpyDeviceToDevice,
                                              node.stream));
         }},
    },
    [] {
      g_naive_scale = new thrust::device_vector<float>(kMaxRows);
      g_naive_q = new thrust::device_vector<uint8_t>(kMaxRows * 128);
    });

}  // namespace
}  // namespace cachestore::bench
