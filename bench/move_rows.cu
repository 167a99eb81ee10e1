// The page movement rows: Llama-3-8B's K/V pages of one layer (P = 16, H = 8, D = 128 bf16: a
// K and a V plane of 32 KiB, 64 KiB a page) moved by one move_pages launch for the batch, n
// pages (the "rows"), their ids the harness's distinct random slots of a 1 GiB cache: gathered
// into a page-first staging buffer, scattered from it into an HND cache (a relayout), and the
// same to and from pinned host memory. Beside each, the same bytes copied contiguously: a lean
// copy kernel on the device (x_baseline, x_naive), cudaMemcpyAsync to and from the host
// (x_baseline), and cudaMemcpyBatchAsync of the pages' planes (stream launches: it has no graph
// form). With checksums: the gather recording each block's CRC-32, the scatter verifying them.
#include "harness.cuh"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "cachestore/move.h"
#include "cuda_check.h"

namespace cachestore::bench {
namespace {

constexpr int32_t kP = 16, kHeads = 8, kRowBytes = 256;
constexpr int64_t kPlaneBytes = int64_t{kP} * kHeads * kRowBytes;  // 32 KiB
constexpr int64_t kPageBytes = 2 * kPlaneBytes;
constexpr int64_t kCachePages = 16384;       // 1 GiB
constexpr int64_t kDeviceMaxPages = 4096;    // 256 MiB moved at the largest n
constexpr int64_t kHostMaxPages = 1024;      // 64 MiB
constexpr int64_t kRowBytesModel = 2 * kPageBytes + 8;  // read + write, the page id

struct Buffers {
  thrust::device_vector<uint8_t> cache, hnd_cache, staging, staging_copy, sent;
  thrust::device_vector<uint32_t> checksums, sent_checksums;  // [kDeviceMaxPages][2 planes]
  uint8_t* host = nullptr;  // pinned [kHostMaxPages pages]
  // cudaMemcpyBatchAsync's operands: a host list of the K and V plane copies of random pages.
  std::vector<void*> batch_dsts;
  std::vector<const void*> batch_srcs;
  std::vector<size_t> batch_sizes;
};
Buffers* g = nullptr;

int64_t cache_pages() { return kCachePages; }

// A cache of kCachePages pages, K plane then V plane; hnd: heads outside tokens.
PageSide cache_side(uint8_t* data, bool hnd, const int64_t* ids) {
  PageSide s;
  s.data = data;
  s.num_pages = kCachePages;
  s.page_size = kP;
  s.page_ids = ids;
  s.page_ids_type = SlotType::kInt64;
  const int64_t token = hnd ? kRowBytes : kHeads * kRowBytes;
  const int64_t head = hnd ? kP * kRowBytes : kRowBytes;
  s.planes[0] = {0, kPlaneBytes, token, head};
  s.planes[1] = {kCachePages * kPlaneBytes, kPlaneBytes, token, head};
  return s;
}

// A page-first staging buffer of `pages` entries: [entry][K plane][V plane].
PageSide staging_side(uint8_t* data, int64_t pages) {
  PageSide s;
  s.data = data;
  s.num_pages = pages;
  s.page_size = kP;
  s.planes[0] = {0, kPageBytes, kHeads * kRowBytes, kRowBytes};
  s.planes[1] = {kPlaneBytes, kPageBytes, kHeads * kRowBytes, kRowBytes};
  return s;
}

// checksums: receives the source blocks' CRC-32; expected: verified before each block is written.
Status move(const Node& node, const PageSide& src, const PageSide& dst,
            uint32_t* checksums = nullptr, const uint32_t* expected = nullptr) {
  MovePagesParams p;
  p.checksums = checksums;
  p.expected_checksums = expected;
  p.num_entries = node.n;
  p.num_entries_non_padded = node.batch.num_tokens_non_padded;
  p.num_layers = 1;
  p.num_planes = 2;
  p.rows[0] = p.rows[1] = {kHeads, kRowBytes};
  p.src = src;
  p.dst = dst;
  p.enable_pdl = node.launch.enable_pdl;
  return move_pages(p, node.stream);
}

uint8_t* raw(thrust::device_vector<uint8_t>& v) { return thrust::raw_pointer_cast(v.data()); }

__global__ void lean_copy_kernel(const uint4* src, uint4* dst, int64_t vectors) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < vectors) dst[i] = src[i];
}

// The same bytes as n pages, copied contiguously by one lean kernel node.
Status lean_copy(const Node& node) {
  const int64_t vectors = node.n * kPageBytes / 16;
  lean_copy_kernel<<<static_cast<unsigned>((vectors + 255) / 256), 256, 0, node.stream>>>(
      reinterpret_cast<const uint4*>(raw(g->staging)),
      reinterpret_cast<uint4*>(raw(g->staging_copy)), vectors);
  return cuda_status(cudaGetLastError());
}

Status host_copy(const Node& node, bool to_host) {
  const size_t bytes = static_cast<size_t>(node.n * kPageBytes);
  return cuda_status(to_host ? cudaMemcpyAsync(g->host, raw(g->staging), bytes,
                                               cudaMemcpyDeviceToHost, node.stream)
                             : cudaMemcpyAsync(raw(g->staging), g->host, bytes,
                                               cudaMemcpyHostToDevice, node.stream));
}

__global__ void scramble_kernel(uint8_t* bytes, int64_t count) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) bytes[i] = static_cast<uint8_t>((static_cast<uint32_t>(i) * 2654435761u) >> 24);
}

// The same n pages' planes copied into the staging buffer by cudaMemcpyBatchAsync, the page
// list on the host (as the engines' block copies have it). The batch has no graph form: in a
// graph capture it is refused, and the row reads stream launches only.
Status batch_copy(const Node& node) {
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(node.stream, &capturing) != cudaSuccess)
    return cuda_status(cudaGetLastError());
  if (capturing != cudaStreamCaptureStatusNone)
    return refuse("cudaMemcpyBatchAsync has no graph form (stream mode only)");
  cudaMemcpyAttributes attributes{};
  attributes.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
  size_t attribute_index = 0;
  return cuda_status(cudaMemcpyBatchAsync(g->batch_dsts.data(), g->batch_srcs.data(),
                                          g->batch_sizes.data(), 2 * node.n, &attributes,
                                          &attribute_index, 1, node.stream));
}

void allocate() {
  g = new Buffers;
  poisoned_cache(g->cache, kCachePages * kPageBytes);
  poisoned_cache(g->hnd_cache, kCachePages * kPageBytes);
  poisoned_cache(g->staging, kDeviceMaxPages * kPageBytes);
  poisoned_cache(g->staging_copy, kDeviceMaxPages * kPageBytes);
  CACHESTORE_CHECK_CUDA(cudaHostAlloc(reinterpret_cast<void**>(&g->host),
                                      kHostMaxPages * kPageBytes, cudaHostAllocDefault));
  // A received staging buffer and its checksums (what the verified scatter checks): random
  // pages, their CRC-32s recorded once here; every block then matches and is written.
  poisoned_cache(g->sent, kDeviceMaxPages * kPageBytes);
  const int64_t sent_bytes = kDeviceMaxPages * kPageBytes;
  scramble_kernel<<<static_cast<unsigned>((sent_bytes + 255) / 256), 256>>>(raw(g->sent),
                                                                          sent_bytes);
  CACHESTORE_CHECK_CUDA(cudaGetLastError());
  g->checksums.resize(kDeviceMaxPages * 2);
  g->sent_checksums.resize(kDeviceMaxPages * 2);
  MovePagesParams p;
  p.num_entries = kDeviceMaxPages;
  p.num_planes = 2;
  p.rows[0] = p.rows[1] = {kHeads, kRowBytes};
  p.src = staging_side(raw(g->sent), kDeviceMaxPages);
  p.dst = staging_side(raw(g->staging_copy), kDeviceMaxPages);
  p.checksums = thrust::raw_pointer_cast(g->sent_checksums.data());
  std::mt19937_64 rng(7);
  std::vector<int64_t> pages(kCachePages);
  for (int64_t i = 0; i < kCachePages; ++i) pages[i] = i;
  std::shuffle(pages.begin(), pages.end(), rng);
  for (int64_t e = 0; e < kDeviceMaxPages; ++e)
    for (int64_t plane = 0; plane < 2; ++plane) {
      g->batch_srcs.push_back(raw(g->cache) + plane * kCachePages * kPlaneBytes +
                              pages[e] * kPlaneBytes);
      g->batch_dsts.push_back(raw(g->staging_copy) + e * kPageBytes + plane * kPlaneBytes);
      g->batch_sizes.push_back(kPlaneBytes);
    }
  if (move_pages(p, nullptr) != Status::kSuccess) {
    std::fprintf(stderr, "move_rows: recording the checksums failed: %s\n", last_error_message());
    std::abort();
  }
  CACHESTORE_CHECK_CUDA(cudaDeviceSynchronize());
}

const Family kMoveRows(
    {
        {70, "copy_kernel_pages", kRowBytesModel, 1, false, nullptr, false, nullptr, cache_pages,
         lean_copy, 0, 0, kDeviceMaxPages},
        {70, "memcpy_pages_to_host", kRowBytesModel, 1, false, nullptr, false, nullptr,
         cache_pages, [](const Node& node) { return host_copy(node, true); }, 0, 0,
         kHostMaxPages},
        {70, "memcpy_pages_from_host", kRowBytesModel, 1, false, nullptr, false, nullptr,
         cache_pages, [](const Node& node) { return host_copy(node, false); }, 0, 0,
         kHostMaxPages},
        {71, "move_gather_pages", kRowBytesModel, 1, false, "copy_kernel_pages", true,
         "copy_kernel_pages", cache_pages,
         [](const Node& node) {
           return move(node, cache_side(raw(g->cache), false, node.slots),
                       staging_side(raw(g->staging), kDeviceMaxPages));
         },
         0, 0, kDeviceMaxPages},
        {72, "move_scatter_pages_hnd", kRowBytesModel, 1, false, "copy_kernel_pages", true,
         "copy_kernel_pages", cache_pages,
         [](const Node& node) {
           return move(node, staging_side(raw(g->staging), kDeviceMaxPages),
                       cache_side(raw(g->hnd_cache), true, node.slots));
         },
         0, 0, kDeviceMaxPages},
        {73, "move_gather_pages_to_host", kRowBytesModel, 1, false, "memcpy_pages_to_host", true,
         nullptr, cache_pages,
         [](const Node& node) {
           return move(node, cache_side(raw(g->cache), false, node.slots),
                       staging_side(g->host, kHostMaxPages));
         },
         0, 0, kHostMaxPages},
        {74, "move_scatter_pages_from_host", kRowBytesModel, 1, false, "memcpy_pages_from_host",
         true, nullptr, cache_pages,
         [](const Node& node) {
           return move(node, staging_side(g->host, kHostMaxPages),
                       cache_side(raw(g->cache), false, node.slots));
         },
         0, 0, kHostMaxPages},
        {75, "move_gather_pages_checksummed", kRowBytesModel, 1, false, "copy_kernel_pages",
         true, "move_gather_pages", cache_pages,
         [](const Node& node) {
           return move(node, cache_side(raw(g->cache), false, node.slots),
                       staging_side(raw(g->staging), kDeviceMaxPages),
                       thrust::raw_pointer_cast(g->checksums.data()));
         },
         0, 0, kDeviceMaxPages},
        {76, "move_scatter_pages_verified", kRowBytesModel, 1, false, "copy_kernel_pages", true,
         "move_scatter_pages_hnd", cache_pages,
         [](const Node& node) {
           return move(node, staging_side(raw(g->sent), kDeviceMaxPages),
                       cache_side(raw(g->hnd_cache), true, node.slots), nullptr,
                       thrust::raw_pointer_cast(g->sent_checksums.data()));
         },
         0, 0, kDeviceMaxPages},
        // At most 512 pages: a batch of 8,192 copies takes ~30 ms a call on the H200.
        {77, "memcpy_batch_pages", kRowBytesModel, 1, false, nullptr, false, nullptr,
         cache_pages, batch_copy, 0, 0, 512},
        {78, "move_gather_pages_vs_batch_memcpy", kRowBytesModel, 1, false, "memcpy_batch_pages",
         true, nullptr, cache_pages,
         [](const Node& node) {
           return move(node, cache_side(raw(g->cache), false, node.slots),
                       staging_side(raw(g->staging), kDeviceMaxPages));
         },
         0, 0, 512},
    },
    allocate);

}  // namespace
}  // namespace cachestore::bench
