// The page movement rows: Llama-3-8B's K/V pages of one layer (P = 16, H = 8, D = 128 bf16: a
// K and a V plane of 32 KiB, 64 KiB a page) moved by one move_pages launch for the batch, n
// pages (the "rows"), their ids the harness's distinct random slots of a 1 GiB cache: gathered
// into a page-first staging buffer, scattered from it into an HND cache (a relayout), and the
// same to and from pinned host memory. Beside each, the same bytes copied contiguously: a lean
// copy kernel on the device (x_baseline, x_naive), cudaMemcpyAsync to and from the host
// (x_baseline).
#include "harness.cuh"

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
  thrust::device_vector<uint8_t> cache, hnd_cache, staging, staging_copy;
  uint8_t* host = nullptr;  // pinned [kHostMaxPages pages]
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

Status move(const Node& node, const PageSide& src, const PageSide& dst) {
  MovePagesParams p;
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

void allocate() {
  g = new Buffers;
  poisoned_cache(g->cache, kCachePages * kPageBytes);
  poisoned_cache(g->hnd_cache, kCachePages * kPageBytes);
  poisoned_cache(g->staging, kDeviceMaxPages * kPageBytes);
  poisoned_cache(g->staging_copy, kDeviceMaxPages * kPageBytes);
  CACHESTORE_CHECK_CUDA(cudaHostAlloc(reinterpret_cast<void**>(&g->host),
                                      kHostMaxPages * kPageBytes, cudaHostAllocDefault));
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
    },
    allocate);

}  // namespace
}  // namespace cachestore::bench
