// move_pages on the GPU against a host reference of its contract (cachestore/move.h): whole
// destination buffers compared byte for byte after random sources, poisoned destinations,
// padded counts, padding and out-of-range ids, relayouts (NHD <-> HND, page size up and down),
// layers in one buffer or one allocation each, pinned host staging, graph replay.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <vector>

#include "cachestore/move.h"
#include "gpu_support.cuh"

namespace cachestore::test {
namespace {

enum class Memory { kDevice, kPinnedHost };

struct SideSpec {
  int32_t page_size;
  int64_t num_pages;
  bool hnd = false;              // heads outside tokens within a page
  bool separate_layers = false;  // one allocation a layer: plane_bases
  Memory memory = Memory::kDevice;
  int64_t page_pad = 0;          // bytes after each page of each plane
};

// One side's bytes: a host copy (the reference's) and the memory the kernel reads or writes.
class SideBuffers {
 public:
  SideBuffers(const SideSpec& spec, const std::vector<PlaneRows>& rows, int32_t layers)
      : spec_(spec), rows_(rows), layers_(layers) {
    for (const PlaneRows& r : rows) {
      plane_offset_.push_back(layer_bytes_);
      layer_bytes_ += spec.num_pages * page_bytes(r);
    }
    const int64_t allocations = spec.separate_layers ? layers : 1;
    const int64_t bytes = spec.separate_layers ? layer_bytes_ : layer_bytes_ * layers;
    for (int64_t a = 0; a < allocations; ++a) {
      void* p = nullptr;
      if (spec.memory == Memory::kPinnedHost) {
        EXPECT_EQ(cudaHostAlloc(&p, bytes, cudaHostAllocDefault), cudaSuccess);
      } else {
        EXPECT_EQ(cudaMalloc(&p, bytes), cudaSuccess);
      }
      memory_.push_back(p);
      host_.emplace_back(bytes);
    }
    if (spec.separate_layers) {
      // Each layer's allocation (aligned as cudaMalloc aligns) a base for each of its planes;
      // the planes' offsets stay in the strides, where the vector width sees them.
      std::vector<uint64_t> bases;
      for (int32_t l = 0; l < layers; ++l)
        for (size_t j = 0; j < rows.size(); ++j)
          bases.push_back(reinterpret_cast<uint64_t>(memory_[l]));
      EXPECT_EQ(cudaMalloc(&bases_, bases.size() * 8), cudaSuccess);
      EXPECT_EQ(cudaMemcpy(bases_, bases.data(), bases.size() * 8, cudaMemcpyHostToDevice),
                cudaSuccess);
    }
  }
  ~SideBuffers() {
    for (void* p : memory_)
      spec_.memory == Memory::kPinnedHost ? cudaFreeHost(p) : cudaFree(p);
    if (bases_ != nullptr) cudaFree(bases_);
  }
  SideBuffers(const SideBuffers&) = delete;
  SideBuffers& operator=(const SideBuffers&) = delete;

  int64_t page_bytes(const PlaneRows& r) const {
    return spec_.page_size * static_cast<int64_t>(r.num_heads) * r.row_bytes + spec_.page_pad;
  }
  void fill(std::mt19937_64& rng) {
    for (auto& h : host_)
      for (auto& b : h) b = static_cast<uint8_t>(rng());
    upload();
  }
  void poison() {
    for (auto& h : host_) std::fill(h.begin(), h.end(), kPoison);
    upload();
  }
  void upload() {
    for (size_t a = 0; a < memory_.size(); ++a)
      EXPECT_EQ(cudaMemcpy(memory_[a], host_[a].data(), host_[a].size(), cudaMemcpyDefault),
                cudaSuccess);
  }
  ::testing::AssertionResult matches_device(const char* name) const {
    for (size_t a = 0; a < memory_.size(); ++a) {
      std::vector<uint8_t> got(host_[a].size());
      if (cudaMemcpy(got.data(), memory_[a], got.size(), cudaMemcpyDefault) != cudaSuccess)
        return ::testing::AssertionFailure() << "download failed";
      auto r = bytes_equal(host_[a], got, std::string(name) + " allocation " + std::to_string(a));
      if (!r) return r;
    }
    return ::testing::AssertionSuccess();
  }

  PageSide side(const void* ids, SlotType ids_type) const {
    PageSide s;
    s.num_pages = spec_.num_pages;
    s.page_size = spec_.page_size;
    s.page_ids = ids;
    s.page_ids_type = ids_type;
    if (spec_.separate_layers) {
      s.plane_bases = static_cast<const uint64_t*>(bases_);
    } else {
      s.data = memory_[0];
      s.layer_stride = layer_bytes_;
    }
    for (size_t j = 0; j < rows_.size(); ++j) {
      const PlaneRows& r = rows_[j];
      const int64_t row = r.row_bytes;
      s.planes[j] = {plane_offset_[j], page_bytes(r),
                     spec_.hnd ? row : r.num_heads * row, spec_.hnd ? spec_.page_size * row : row};
    }
    return s;
  }
  // The host byte of (layer, plane, page, token, head, byte).
  uint8_t* host_byte(int32_t l, int32_t j, int64_t page, int64_t t, int64_t h, int64_t b) {
    const PlaneRows& r = rows_[j];
    const int64_t row = r.row_bytes;
    const int64_t in_page = spec_.hnd ? (h * spec_.page_size + t) * row + b
                                      : (t * r.num_heads + h) * row + b;
    const int64_t at = plane_offset_[j] + page * page_bytes(r) + in_page;
    return spec_.separate_layers ? &host_[l][at] : &host_[0][l * layer_bytes_ + at];
  }

 private:
  SideSpec spec_;
  std::vector<PlaneRows> rows_;
  int32_t layers_;
  std::vector<int64_t> plane_offset_;
  int64_t layer_bytes_ = 0;
  std::vector<void*> memory_;
  std::vector<std::vector<uint8_t>> host_;
  void* bases_ = nullptr;
};

// The contract on the host copies: token t < n * Ps from source entry t / Ps to destination
// entry t / Pd; negative ids skip, ids >= num_pages skip and count once per real entry.
// `skip(e, l, j)`: a source block the kernel must not write (its checksum differs).
using SkipBlock = std::function<bool(int64_t, int32_t, int32_t)>;

void reference_move(SideBuffers& src, const SideSpec& ss, const std::vector<int64_t>& src_ids,
                    SideBuffers& dst, const SideSpec& ds, const std::vector<int64_t>& dst_ids,
                    const std::vector<PlaneRows>& rows, int32_t layers, int64_t n,
                    uint64_t* out_of_range, const SkipBlock& skip = nullptr) {
  const int64_t ps = ss.page_size, pd = ds.page_size;
  const auto id = [](const std::vector<int64_t>& ids, int64_t e) {
    return ids.empty() ? e : ids[e];
  };
  for (int64_t e = 0; e < n; ++e)
    if (id(src_ids, e) >= ss.num_pages) ++*out_of_range;
  for (int64_t d = 0; d * pd < n * ps; ++d)
    if (id(dst_ids, d) >= ds.num_pages) ++*out_of_range;
  for (int64_t t = 0; t < n * ps; ++t) {
    const int64_t sp = id(src_ids, t / ps), dp = id(dst_ids, t / pd);
    if (sp < 0 || sp >= ss.num_pages || dp < 0 || dp >= ds.num_pages) continue;
    for (int32_t l = 0; l < layers; ++l)
      for (size_t j = 0; j < rows.size(); ++j)
        if (!skip || !skip(t / ps, l, static_cast<int32_t>(j)))
        for (int64_t h = 0; h < rows[j].num_heads; ++h)
          for (int64_t b = 0; b < rows[j].row_bytes; ++b)
            *dst.host_byte(l, static_cast<int32_t>(j), dp, t % pd, h, b) =
                *src.host_byte(l, static_cast<int32_t>(j), sp, t % ps, h, b);
  }
}

// zlib's CRC-32, bit by bit: the checksums' reference.
uint32_t crc32_update(uint32_t crc, uint8_t byte) {
  crc ^= byte;
  for (int i = 0; i < 8; ++i) crc = (crc & 1u) ? (crc >> 1) ^ 0xEDB88320u : crc >> 1;
  return crc;
}

// The CRC-32 of a source block: plane j of layer l of page `page`, its rows in row order.
uint32_t block_crc(SideBuffers& side, const SideSpec& spec, const PlaneRows& rows, int32_t l,
                   int32_t j, int64_t page) {
  uint32_t crc = 0xFFFFFFFFu;
  for (int64_t t = 0; t < spec.page_size; ++t)
    for (int64_t h = 0; h < rows.num_heads; ++h)
      for (int64_t b = 0; b < rows.row_bytes; ++b)
        crc = crc32_update(crc, *side.host_byte(l, j, page, t, h, b));
  return crc ^ 0xFFFFFFFFu;
}

TEST(Crc32Reference, CheckValue) {
  uint32_t crc = 0xFFFFFFFFu;
  for (const char c : std::string("123456789")) crc = crc32_update(crc, static_cast<uint8_t>(c));
  EXPECT_EQ(crc ^ 0xFFFFFFFFu, 0xCBF43926u);  // the CRC-32 check value
}

struct MoveCase {
  const char* name;
  std::vector<PlaneRows> rows;
  int32_t layers;
  SideSpec src;
  SideSpec dst;
  bool src_ids;   // else entry e is page e
  bool dst_ids;
  int64_t entries;  // source entries in the padded batch
};

// Distinct page ids in random order, a few replaced by padding (-1) or out-of-range ids.
std::vector<int64_t> page_ids(std::mt19937_64& rng, int64_t count, int64_t num_pages) {
  std::vector<int64_t> all(num_pages);
  for (int64_t i = 0; i < num_pages; ++i) all[i] = i;
  std::shuffle(all.begin(), all.end(), rng);
  std::vector<int64_t> ids(all.begin(), all.begin() + count);
  if (count > 2) {
    ids[1] = -1;
    ids[count - 1] = num_pages + static_cast<int64_t>(rng() % 5);
  }
  return ids;
}

class MovePagesTest : public GpuTest, public ::testing::WithParamInterface<MoveCase> {};

// One padded batch of a case: fresh random ids for each side that has them (host and device),
// the device count n, and the params of the move over the case's buffers.
struct CaseBatch {
  CaseBatch(std::mt19937_64& rng, const MoveCase& c, int64_t n)
      : src_ids(c.src_ids ? page_ids(rng, c.entries, c.src.num_pages) : std::vector<int64_t>{}),
        dst_ids(c.dst_ids ? page_ids(rng, c.entries * c.src.page_size / c.dst.page_size,
                                     c.dst.num_pages)
                          : std::vector<int64_t>{}),
        d_src_ids(src_ids.begin(), src_ids.end()),
        d_dst_ids(dst_ids.begin(), dst_ids.end()),
        d_n(1, static_cast<int32_t>(n)) {}

  MovePagesParams params(const MoveCase& c, const SideBuffers& src, const SideBuffers& dst,
                         thrust::device_vector<unsigned long long>& diagnostics) const {
    MovePagesParams p;
    p.num_entries = c.entries;
    p.num_entries_non_padded = thrust::raw_pointer_cast(d_n.data());
    p.diagnostics =
        reinterpret_cast<MoveDiagnostics*>(thrust::raw_pointer_cast(diagnostics.data()));
    p.num_layers = c.layers;
    p.num_planes = static_cast<int32_t>(c.rows.size());
    for (size_t j = 0; j < c.rows.size(); ++j) p.rows[j] = c.rows[j];
    p.src = src.side(src_ids.empty() ? nullptr : thrust::raw_pointer_cast(d_src_ids.data()),
                     SlotType::kInt64);
    p.dst = dst.side(dst_ids.empty() ? nullptr : thrust::raw_pointer_cast(d_dst_ids.data()),
                     SlotType::kInt64);
    return p;
  }

  std::vector<int64_t> src_ids, dst_ids;
  thrust::device_vector<int64_t> d_src_ids, d_dst_ids;
  thrust::device_vector<int32_t> d_n;
};

TEST_P(MovePagesTest, WholeDestinationMatchesReference) {
  const MoveCase& c = GetParam();
  SideBuffers src(c.src, c.rows, c.layers), dst(c.dst, c.rows, c.layers);
  for (int64_t n : {c.entries, c.entries - 1, int64_t{1}, int64_t{0}}) {
    src.fill(rng_);
    dst.poison();
    const CaseBatch batch(rng_, c, n);
    thrust::device_vector<unsigned long long> d_diag(2, 0);
    STORE_ASSERT(move_pages(batch.params(c, src, dst, d_diag), nullptr));
    CUDA_ASSERT(cudaDeviceSynchronize());
    uint64_t out_of_range = 0;
    reference_move(src, c.src, batch.src_ids, dst, c.dst, batch.dst_ids, c.rows, c.layers, n,
                   &out_of_range);
    EXPECT_TRUE(dst.matches_device("dst")) << "n = " << n;
    EXPECT_TRUE(src.matches_device("src (unchanged)")) << "n = " << n;
    EXPECT_EQ(static_cast<uint64_t>(d_diag[0]), out_of_range) << "n = " << n;
    EXPECT_EQ(static_cast<uint64_t>(d_diag[1]), 0u);
  }
}

// With checksums: first recorded (every real source block's CRC-32, nothing else written), then
// verified (a block whose expected CRC-32 is changed is not written and is counted; the rest is
// the plain move's bytes).
TEST_P(MovePagesTest, ChecksumsRecordedThenVerified) {
  const MoveCase& c = GetParam();
  const int32_t planes = static_cast<int32_t>(c.rows.size());
  const int64_t blocks = c.entries * c.layers * planes;
  SideBuffers src(c.src, c.rows, c.layers), dst(c.dst, c.rows, c.layers);
  for (int64_t n : {c.entries, c.entries - 1, int64_t{1}, int64_t{0}}) {
    src.fill(rng_);
    const CaseBatch batch(rng_, c, n);
    const std::vector<int64_t>& sids = batch.src_ids;
    // Each real block with an in-range source page: its CRC-32; the others keep the poison.
    constexpr uint32_t kUnwritten = 0xA5A5A5A5u;
    std::vector<uint32_t> want(blocks, kUnwritten);
    for (int64_t e = 0; e < n; ++e) {
      const int64_t page = sids.empty() ? e : sids[e];
      if (page < 0 || page >= c.src.num_pages) continue;
      for (int32_t l = 0; l < c.layers; ++l)
        for (int32_t j = 0; j < planes; ++j)
          want[(e * c.layers + l) * planes + j] = block_crc(src, c.src, c.rows[j], l, j, page);
    }
    // Changed expectations: block 0 and one random block (whichever of them is real counts).
    std::vector<uint32_t> expected = want;
    std::vector<bool> changed(blocks, false);
    for (const int64_t b : {int64_t{0}, static_cast<int64_t>(rng_() % blocks)}) {
      expected[b] ^= 1u << (rng_() % 32);
      changed[b] = true;
    }
    uint64_t mismatches = 0;
    for (int64_t b = 0; b < blocks; ++b) mismatches += changed[b] && want[b] != kUnwritten;
    for (const bool verify : {false, true}) {
      dst.poison();
      thrust::device_vector<uint32_t> d_sums(blocks, kUnwritten);
      thrust::device_vector<uint32_t> d_expected(expected.begin(), expected.end());
      thrust::device_vector<unsigned long long> d_diag(3, 0);
      MovePagesParams p = batch.params(c, src, dst, d_diag);
      p.checksums = thrust::raw_pointer_cast(d_sums.data());
      if (verify) p.expected_checksums = thrust::raw_pointer_cast(d_expected.data());
      STORE_ASSERT(move_pages(p, nullptr));
      CUDA_ASSERT(cudaDeviceSynchronize());
      uint64_t out_of_range = 0;
      reference_move(src, c.src, sids, dst, c.dst, batch.dst_ids, c.rows, c.layers, n,
                     &out_of_range,
                     [&](int64_t e, int32_t l, int32_t j) {
                       return verify && changed[(e * c.layers + l) * planes + j];
                     });
      const std::string at = "n = " + std::to_string(n) + (verify ? ", verified" : ", recorded");
      EXPECT_TRUE(dst.matches_device("dst")) << at;
      EXPECT_TRUE(src.matches_device("src (unchanged)")) << at;
      std::vector<uint32_t> sums(d_sums.begin(), d_sums.end());
      EXPECT_EQ(sums, want) << at;
      EXPECT_EQ(static_cast<uint64_t>(d_diag[0]), out_of_range) << at;
      EXPECT_EQ(static_cast<uint64_t>(d_diag[2]), verify ? mismatches : 0u) << at;
    }
  }
}

const std::vector<PlaneRows> kKv{{8, 256}, {8, 256}};        // bf16 K and V, H 8, D 128
const std::vector<PlaneRows> kNvfp4{{4, 64}, {4, 64}, {4, 8}, {4, 8}};  // codes and scales
const std::vector<PlaneRows> kOdd{{3, 6}, {1, 2}};           // D 3 bf16; one 2-byte row

INSTANTIATE_TEST_SUITE_P(
    Layouts, MovePagesTest,
    ::testing::Values(
        MoveCase{"gather_nhd_to_staging", kKv, 3, {16, 40}, {16, 12}, true, false, 12},
        MoveCase{"scatter_staging_p64_to_hnd_p16", kKv, 2, {64, 6}, {16, 40, true, true}, false,
                 true, 6},
        MoveCase{"cache_p16_to_cache_p64", kKv, 2, {16, 40}, {64, 12}, true, true, 8},
        MoveCase{"pinned_host_gather", kKv, 2, {16, 30}, {16, 9, false, false, Memory::kPinnedHost},
                 true, false, 9},
        MoveCase{"pinned_host_scatter_relayout", kKv, 2,
                 {16, 9, false, false, Memory::kPinnedHost}, {32, 20, true}, false, true, 8},
        MoveCase{"nvfp4_planes_padded_pages", kNvfp4, 2, {16, 20, false, false, Memory::kDevice, 16},
                 {16, 7}, true, false, 7},
        MoveCase{"narrow_rows_any_alignment", kOdd, 3, {5, 17, true}, {5, 11, false, true}, true,
                 true, 11},
        MoveCase{"byte_pages_one_row", {{1, 656 * 4}}, 4, {1, 50}, {1, 10, false, true}, true,
                 false, 10}),
    [](const ::testing::TestParamInfo<MoveCase>& info) { return std::string(info.param.name); });

class MovePagesRefusals : public GpuTest {};

TEST_F(MovePagesRefusals, EachNamesTheArgumentAndLaunchesNothing) {
  thrust::device_vector<uint8_t> a(1 << 16), b(1 << 16);
  MovePagesParams p;
  p.num_entries = 4;
  p.rows[0] = {1, 256};
  const auto side = [](void* data, int32_t page_size, int64_t pages) {
    PageSide s;
    s.data = data;
    s.num_pages = pages;
    s.page_size = page_size;
    s.planes[0] = {0, 256 * page_size, 256, 256};
    return s;
  };
  p.src = side(thrust::raw_pointer_cast(a.data()), 4, 16);
  p.dst = side(thrust::raw_pointer_cast(b.data()), 4, 16);
  EXPECT_EQ(check(p), Status::kSuccess) << last_error_message();

  MovePagesParams q = p;
  q.dst.page_size = 3;
  q.dst.planes[0].page_stride = 256 * 3;
  EXPECT_EQ(check(q), Status::kErrorNotSupported);
  EXPECT_NE(std::string(last_error_message()).find("one must divide the other"),
            std::string::npos);

  q = p;
  q.dst = side(thrust::raw_pointer_cast(a.data()) + 512, 4, 16);  // inside the source's bytes
  EXPECT_EQ(check(q), Status::kErrorInvalidArgument);
  EXPECT_NE(std::string(last_error_message()).find("src and dst overlap"), std::string::npos);

  q = p;
  q.dst.num_pages = 3;  // a staging buffer of 3 entries for 4
  EXPECT_EQ(check(q), Status::kErrorInvalidArgument);
  EXPECT_NE(std::string(last_error_message()).find("staging buffer too small"),
            std::string::npos);

  q = p;
  q.dst.planes[0].token_stride = 128;  // rows of 256 bytes 128 apart
  EXPECT_EQ(check(q), Status::kErrorInvalidArgument);
  EXPECT_NE(std::string(last_error_message()).find("dst.planes[0]"), std::string::npos);

  std::vector<uint8_t> pageable(1 << 16);
  q = p;
  q.dst.data = pageable.data();
  EXPECT_EQ(move_pages(q, nullptr), Status::kErrorInvalidArgument);
  EXPECT_NE(std::string(last_error_message()).find("dst.data is pageable host memory"),
            std::string::npos);
  EXPECT_EQ(std::count(pageable.begin(), pageable.end(), 0), static_cast<long>(pageable.size()));
}

// Captured once at the padded batch, replayed at every count: entries at or past the count
// touch nothing, each replay's destination equals the reference.
class MovePagesGraph : public GpuTest {};

TEST_F(MovePagesGraph, ReplayAtEveryCount) {
  const std::vector<PlaneRows> rows = kKv;
  const SideSpec cache{16, 24}, stage{16, 8};
  SideBuffers src(cache, rows, 2), dst(stage, rows, 2);
  std::vector<int64_t> ids = page_ids(rng_, 8, cache.num_pages);
  thrust::device_vector<int64_t> d_ids(ids.begin(), ids.end());
  thrust::device_vector<int32_t> d_n(1, 8);
  MovePagesParams p;
  p.num_entries = 8;
  p.num_entries_non_padded = thrust::raw_pointer_cast(d_n.data());
  p.num_layers = 2;
  p.num_planes = 2;
  p.rows[0] = rows[0];
  p.rows[1] = rows[1];
  p.src = src.side(thrust::raw_pointer_cast(d_ids.data()), SlotType::kInt64);
  p.dst = dst.side(nullptr, SlotType::kInt64);
  cudaStream_t stream;
  CUDA_ASSERT(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaGraph_t graph;
  CUDA_ASSERT(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  STORE_ASSERT(move_pages(p, stream));
  CUDA_ASSERT(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec;
  CUDA_ASSERT(cudaGraphInstantiate(&exec, graph, 0));
  for (int32_t n = 8; n >= 0; --n) {
    src.fill(rng_);
    dst.poison();
    d_n[0] = n;
    CUDA_ASSERT(cudaGraphLaunch(exec, stream));
    CUDA_ASSERT(cudaStreamSynchronize(stream));
    uint64_t out_of_range = 0;
    reference_move(src, cache, ids, dst, stage, {}, rows, 2, n, &out_of_range);
    EXPECT_TRUE(dst.matches_device("staging")) << "n = " << n;
  }
  CUDA_ASSERT(cudaGraphExecDestroy(exec));
  CUDA_ASSERT(cudaGraphDestroy(graph));
  CUDA_ASSERT(cudaStreamDestroy(stream));
}

}  // namespace
}  // namespace cachestore::test
