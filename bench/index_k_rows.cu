// The index-K rows: bf16 (beside the naive bf16 scatter), fp8 with either scale rule (beside the
// naive fp8 composition) and fp4, at D = 128 (DeepSeek's indexer), pages of kPage slots.
#include "harness.cuh"
#include "layout_pattern.cuh"

namespace cachestore::bench {
namespace {

// The write pattern of an index-K layout's records at the row's slots, without quantizing
// (layout_pattern.cuh), into the pool's cache of that layout.
Status index_k_pattern(const Node& node, IndexKFormat format) {
  thrust::device_vector<uint8_t>& cache =
      format == IndexKFormat::kFp8 ? pool().fp8_cache : pool().fp4_cache;
  return cuda_status(layout_pattern(node.in, 128, node.slots,
                                    thrust::raw_pointer_cast(cache.data()), node.n, kPageShift,
                                    layout::min_page_stride(format, kPage, 128),
                                    layout::index_k_rows(format, 128), node.stream));
}

const Family kIndexK(
    {
        {7, "index_k_bf16", 520, 128, false, "naive_bf16_scatter", true, "naive_bf16_scatter",
         [] { return pool().bf16_slots; },
         [](const Node& node) {
           IndexKBf16Params p;
           p.batch = node.batch;
           p.slots = node.slot_map;
           p.k = node.in;
           p.k_row_stride = 128;
           p.cache = thrust::raw_pointer_cast(pool().bf16_cache.data());
           p.cache_row_stride = 128;
           p.num_slots = pool().bf16_slots;
           p.launch = node.launch;
           return store_index_k_bf16(p, node.stream);
         }},
        {8, "index_k_fp8_amax", 396, 128, false, "naive_fp8_composition", true,
         "naive_bf16_scatter", [] { return pool().index_pages * kPage; },
         [](const Node& node) {
           return store_index_k_fp8(index_k_fp8_params(node, node.in, ScaleRule::kAmax),
                                    node.stream);
         }},
        {9, "index_k_fp8_pow2", 396, 128, false, "naive_fp8_composition", true,
         "naive_bf16_scatter", [] { return pool().index_pages * kPage; },
         [](const Node& node) {
           return store_index_k_fp8(index_k_fp8_params(node, node.in, ScaleRule::kPow2),
                                    node.stream);
         }},
        {15, "index_k_fp4", 332, 128, false, nullptr, true, "naive_bf16_scatter",
         [] { return pool().index_pages * kPage; },
         [](const Node& node) {
           IndexKFp4Params p;
           p.batch = node.batch;
           p.slots = node.slot_map;
           p.k = node.in;
           p.k_row_stride = 128;
           p.cache = pool().fp4(Fp4Ties::kToEven);
           p.launch = node.launch;
           return store_index_k_fp4(p, node.stream);
         }},
        {38, "pattern_index_k_fp8", 396, 128, false, nullptr, false, nullptr,
         [] { return pool().index_pages * kPage; },
         [](const Node& node) { return index_k_pattern(node, IndexKFormat::kFp8); }},
        {38, "pattern_index_k_fp4", 332, 128, false, nullptr, false, nullptr,
         [] { return pool().index_pages * kPage; },
         [](const Node& node) { return index_k_pattern(node, IndexKFormat::kFp4); }},
    },
    nullptr);

}  // namespace
}  // namespace cachestore::bench
