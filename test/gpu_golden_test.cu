// Interop on the GPU: the kernels reproduce the peers' golden records byte for byte (vLLM's
// indexer store, both scale formats; vLLM's fp8_ds_mla store; SGLang's FlashMLA V4 and V4.1
// stores and its fp4 indexer, both tie rules),
// stored at the golden slots (page size 64) and read back from the paged cache.
#include "cachestore/layout.h"
#include "golden.h"
#include "gpu_support.cuh"

namespace cachestore::test {
namespace {

constexpr int32_t kPage = 64;

// Slot s's record as the golden files hold it: its data row, then its scale row (none for a
// one-record layout), read from a cache of `stride`-byte pages of kPage slots.
void append_record(const std::vector<uint8_t>& cache, const layout::PagedRows& rows, int64_t s,
                   int64_t stride, std::vector<uint8_t>* out) {
  const uint8_t* d = &cache[layout::data_offset(rows, s / kPage, s % kPage, stride)];
  const uint8_t* sc = &cache[layout::scale_offset(rows, s / kPage, s % kPage, kPage, stride)];
  out->insert(out->end(), d, d + rows.data_row);
  out->insert(out->end(), sc, sc + layout::scale_row_bytes(rows));
}

class GoldenTest : public GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    input_ = golden_input();
    slots_ = read_golden<int64_t>("slots_i64_256.bin", kGoldenRows);
    pages_ = (*std::max_element(slots_.begin(), slots_.end())) / kPage + 1;
    d_input_.assign(input_.begin(), input_.end());
    d_slots_.assign(slots_.begin(), slots_.end());
  }
  const void* input(int column) const {
    return thrust::raw_pointer_cast(d_input_.data()) + column;
  }
  Batch batch() const { return {kGoldenRows, nullptr, nullptr}; }
  SlotMapping slots() const { return {thrust::raw_pointer_cast(d_slots_.data()), SlotType::kInt64}; }

  IndexKFp8Cache index_cache(thrust::device_vector<uint8_t>& buffer, ScaleRule rule) const {
    const int64_t stride = layout::min_page_stride(IndexKFormat::kFp8, kPage, 128);
    buffer.assign(pages_ * stride, kPoison);
    return {thrust::raw_pointer_cast(buffer.data()), pages_, kPage, stride, 128, rule};
  }
  // The 132-byte records (data then scale) of the golden rows, read back from the cache.
  std::vector<uint8_t> index_records(const thrust::device_vector<uint8_t>& buffer) const {
    std::vector<uint8_t> cache(buffer.size()), out;
    thrust::copy(buffer.begin(), buffer.end(), cache.begin());
    const int64_t stride = layout::min_page_stride(IndexKFormat::kFp8, kPage, 128);
    for (int64_t s : slots_)
      append_record(cache, layout::index_k_rows(IndexKFormat::kFp8, 128), s, stride, &out);
    return out;
  }

  std::vector<uint16_t> input_;
  std::vector<int64_t> slots_;
  int64_t pages_ = 0;
  thrust::device_vector<uint16_t> d_input_;
  thrust::device_vector<int64_t> d_slots_;
};

TEST_F(GoldenTest, IndexKFp8BothRules) {
  for (auto [rule, file] : {std::pair{ScaleRule::kAmax, "index_k_fp8_amax_records_256x132.bin"},
                            std::pair{ScaleRule::kPow2, "index_k_fp8_pow2_records_256x132.bin"}}) {
    thrust::device_vector<uint8_t> buffer;
    IndexKFp8Params p;
    p.batch = batch();
    p.slots = slots();
    p.k = input(0);
    p.k_row_stride = kGoldenCols;
    p.cache = index_cache(buffer, rule);
    STORE_ASSERT(store_index_k_fp8(p, nullptr));
    CUDA_ASSERT(cudaDeviceSynchronize());
    EXPECT_TRUE(bytes_equal(read_golden<uint8_t>(file, kGoldenRows * 132), index_records(buffer),
                            file));
  }
}

TEST_F(GoldenTest, MlaV4AndV32WithFusedIndexK) {
  for (MlaLayout layout_kind : {MlaLayout::kV4, MlaLayout::kV32}) {
    const bool v4 = layout_kind == MlaLayout::kV4;
    const int64_t stride = layout::min_page_stride(layout_kind, kPage);
    thrust::device_vector<uint8_t> kv(pages_ * stride, kPoison), index_buffer;
    FusedStoreParams p;
    p.batch = batch();
    p.kv_slots = slots();
    p.nope = input(0);
    p.nope_row_stride = kGoldenCols;
    p.rope = input(layout::mla_layout(layout_kind).nope_dim);
    p.rope_row_stride = kGoldenCols;
    p.kv_cache = {layout_kind, thrust::raw_pointer_cast(kv.data()), pages_, kPage, stride,
                  v4 ? ScaleRule::kPow2 : ScaleRule::kAmax};
    p.index_k = input(0);
    p.index_k_row_stride = kGoldenCols;
    p.index_slots = slots();
    p.index_cache = index_cache(index_buffer, ScaleRule::kAmax);
    STORE_ASSERT(fused_store_cache(p, nullptr));
    CUDA_ASSERT(cudaDeviceSynchronize());

    std::vector<uint8_t> cache(kv.size()), records;
    thrust::copy(kv.begin(), kv.end(), cache.begin());
    for (int64_t s : slots_)
      append_record(cache, layout::mla_layout(p.kv_cache.layout).rows, s, stride, &records);
    const char* file = v4 ? "mla_v4_records_256x584.bin" : "mla_v32_amax_records_256x656.bin";
    EXPECT_TRUE(bytes_equal(read_golden<uint8_t>(file, kGoldenRows * (v4 ? 584 : 656)), records, file));
    EXPECT_TRUE(bytes_equal(
        read_golden<uint8_t>("index_k_fp8_amax_records_256x132.bin", kGoldenRows * 132),
        index_records(index_buffer), "fused index-K"));
  }
}

// The 68-byte fp4 indexer records of the golden rows, read back from the cache.
std::vector<uint8_t> fp4_index_records(const thrust::device_vector<uint8_t>& buffer,
                                       const std::vector<int64_t>& slots) {
  std::vector<uint8_t> cache(buffer.size()), out;
  thrust::copy(buffer.begin(), buffer.end(), cache.begin());
  const int64_t stride = layout::min_page_stride(IndexKFormat::kFp4, kPage, 128);
  for (int64_t s : slots)
    append_record(cache, layout::index_k_rows(IndexKFormat::kFp4, 128), s, stride, &out);
  return out;
}

TEST_F(GoldenTest, IndexKFp4BothTieRules) {
  for (auto [ties, file] : {std::pair{Fp4Ties::kToEven, "index_k_fp4_rne_records_256x68.bin"},
                            std::pair{Fp4Ties::kTowardZero, "index_k_fp4_tz_records_256x68.bin"}}) {
    const int64_t stride = layout::min_page_stride(IndexKFormat::kFp4, kPage, 128);
    thrust::device_vector<uint8_t> buffer(pages_ * stride, kPoison);
    IndexKFp4Params p;
    p.batch = batch();
    p.slots = slots();
    p.k = input(0);
    p.k_row_stride = kGoldenCols;
    p.cache = {thrust::raw_pointer_cast(buffer.data()), pages_, kPage, stride, 128, ties};
    STORE_ASSERT(store_index_k_fp4(p, nullptr));
    CUDA_ASSERT(cudaDeviceSynchronize());
    EXPECT_TRUE(bytes_equal(read_golden<uint8_t>(file, kGoldenRows * 68),
                            fp4_index_records(buffer, slots_), file));
  }
}

// V41 and V41_FP4, each with the fp4 index-K fused (V41 ties toward zero, V41_FP4 to even).
TEST_F(GoldenTest, MlaV41AndV41Fp4WithFusedFp4IndexK) {
  for (MlaLayout layout_kind : {MlaLayout::kV41, MlaLayout::kV41Fp4}) {
    const bool fp4 = layout_kind == MlaLayout::kV41Fp4;
    const int64_t stride = layout::min_page_stride(layout_kind, kPage);
    const int64_t index_stride = layout::min_page_stride(IndexKFormat::kFp4, kPage, 128);
    thrust::device_vector<uint8_t> kv(pages_ * stride, kPoison),
        index_buffer(pages_ * index_stride, kPoison);
    const Fp4Ties ties = fp4 ? Fp4Ties::kToEven : Fp4Ties::kTowardZero;
    FusedStoreParams p;
    p.batch = batch();
    p.kv_slots = slots();
    p.nope = input(0);
    p.nope_row_stride = kGoldenCols;
    p.rope = input(layout::mla_layout(layout_kind).nope_dim);
    p.rope_row_stride = kGoldenCols;
    p.kv_cache = {layout_kind, thrust::raw_pointer_cast(kv.data()), pages_, kPage, stride,
                  ScaleRule::kPow2};
    p.index_k = input(0);
    p.index_k_row_stride = kGoldenCols;
    p.index_slots = slots();
    p.index_format = IndexKFormat::kFp4;
    p.index_fp4_cache = {thrust::raw_pointer_cast(index_buffer.data()), pages_, kPage,
                         index_stride, 128, ties};
    STORE_ASSERT(fused_store_cache(p, nullptr));
    CUDA_ASSERT(cudaDeviceSynchronize());

    std::vector<uint8_t> cache(kv.size()), records;
    thrust::copy(kv.begin(), kv.end(), cache.begin());
    for (int64_t s : slots_)
      append_record(cache, layout::mla_layout(layout_kind).rows, s, stride, &records);
    const char* file = fp4 ? "mla_v41_fp4_records_256x288.bin" : "mla_v41_fp8_records_256x528.bin";
    EXPECT_TRUE(bytes_equal(read_golden<uint8_t>(file, kGoldenRows * (fp4 ? 288 : 528)), records,
                            file));
    const char* index_file =
        fp4 ? "index_k_fp4_rne_records_256x68.bin" : "index_k_fp4_tz_records_256x68.bin";
    EXPECT_TRUE(bytes_equal(read_golden<uint8_t>(index_file, kGoldenRows * 68),
                            fp4_index_records(index_buffer, slots_), index_file));
  }
}

}  // namespace
}  // namespace cachestore::test
