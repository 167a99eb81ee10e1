// check(MovePagesParams): every refusal of move_pages that needs no device query, each naming
// the argument by its path in the params struct.
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>

#include "cachestore/move.h"
#include "check.h"
#include "detail/status.h"

namespace cachestore {
namespace {

using detail::fail;
using detail::ll;

inline constexpr int32_t kMaxMoveLayers = 65535;  // the grid's y dimension
inline constexpr int64_t kMaxEntries = 0x7fffffff;  // the grid's x dimension
inline constexpr int32_t kMaxPageSize = 1 << 20;

// The byte span a plane of one layer covers, [0, extent), from its base; rows of one plane
// must not overlap (a destination's rows would race): the nested-stride rule (check.h).
Status plane_extent(const PlaneStrides& s, const PlaneRows& rows, int64_t num_pages,
                    int32_t page_size, const char* name, int64_t* extent) {
  const detail::NestedStrides r = detail::nested_strides<4>({{{1, rows.row_bytes},
                                                              {s.page_stride, num_pages},
                                                              {s.token_stride, page_size},
                                                              {s.head_stride, rows.num_heads}}});
  if (r.verdict == detail::NestedStrides::kOverlap)
    return fail(Status::kErrorInvalidArgument,
                "%s: strides (page %lld, token %lld, head %lld bytes) overlap rows of %d "
                "bytes; every row of a plane must have its own bytes",
                name, ll(s.page_stride), ll(s.token_stride), ll(s.head_stride), rows.row_bytes);
  if (r.verdict == detail::NestedStrides::kOverflow)
    return fail(Status::kErrorCapacityOverflow, "%s: the plane's byte span overflows int64",
                name);
  *extent = r.extent;
  return Status::kSuccess;
}

// The bytes each plane of a side covers: layer l's [first + l * stride, + extent) (extent zero:
// not known on the host, from plane_bases: the caller keeps the sides apart). Layers of separate
// allocations one stride apart leave gaps that another buffer may fill, so the layers' own
// bytes are compared, not the span from the first to the last.
struct PlaneSpan {
  int64_t first;
  int64_t extent;
  int64_t stride;
  int32_t layers;
};
using Spans = std::array<PlaneSpan, kMaxPagePlanes>;

// Whether some layer of `a` shares a byte with some layer of `b`: for each layer of `a`, the
// first layer of `b` that ends after it starts (strides >= 0; a stride of 0 is one layer).
bool spans_overlap(const PlaneSpan& a, const PlaneSpan& b) {
  if (a.extent == 0 || b.extent == 0) return false;
  const int32_t a_layers = a.stride == 0 ? 1 : a.layers;
  const int32_t b_layers = b.stride == 0 ? 1 : b.layers;
  for (int32_t l = 0; l < a_layers; ++l) {
    const int64_t start = a.first + l * a.stride, end = start + a.extent;
    int64_t m = 0;  // the first layer m of b that ends after start
    if (b.first + b.extent <= start) {
      if (b.stride == 0) continue;
      m = (start - b.extent - b.first) / b.stride + 1;
    }
    if (m < b_layers && b.first + m * b.stride < end) return true;
  }
  return false;
}

Status check_side(const MovePagesParams& p, const PageSide& side, int64_t entries,
                  const char* name, Spans* spans) {
  if (side.page_size < 1 || side.page_size > kMaxPageSize)
    return fail(Status::kErrorNotSupported, "%s.page_size = %d: must be in [1, 2^20]", name,
                side.page_size);
  if (side.num_pages < 1)
    return fail(Status::kErrorInvalidArgument, "%s.num_pages = %lld: must be >= 1", name,
                ll(side.num_pages));
  if (side.page_ids == nullptr && entries > side.num_pages)
    return fail(Status::kErrorInvalidArgument,
                "%s: %lld entries without page_ids need as many pages; it has %lld (a staging "
                "buffer too small for the batch)",
                name, ll(entries), ll(side.num_pages));
  if (side.page_ids != nullptr && side.page_ids_type != SlotType::kInt32 &&
      side.page_ids_type != SlotType::kInt64)
    return fail(Status::kErrorInvalidArgument, "%s.page_ids_type = %d: must be kInt32 or kInt64",
                name, static_cast<int>(side.page_ids_type));
  if (side.page_ids != nullptr &&
      !detail::aligned_to(side.page_ids, side.page_ids_type == SlotType::kInt32 ? 4 : 8))
    return fail(Status::kErrorMisalignedOperand, "%s.page_ids must be aligned to its type",
                name);
  if (side.data == nullptr && side.plane_bases == nullptr)
    return fail(Status::kErrorInvalidArgument, "%s.data is null", name);
  if (side.plane_bases != nullptr && !detail::aligned_to(side.plane_bases, 8))
    return fail(Status::kErrorMisalignedOperand, "%s.plane_bases must be 8-byte aligned", name);
  if (side.layer_stride < 0)
    return fail(Status::kErrorInvalidArgument, "%s.layer_stride = %lld: must be >= 0", name,
                ll(side.layer_stride));
  if (side.plane_bases == nullptr && p.num_layers > 1 && side.layer_stride == 0)
    return fail(Status::kErrorInvalidArgument,
                "%s.layer_stride = 0 with %d layers: every layer would be the same bytes", name,
                p.num_layers);
  const auto base = static_cast<int64_t>(reinterpret_cast<uintptr_t>(side.data));
  *spans = {};
  for (int32_t j = 0; j < p.num_planes; ++j) {
    const PlaneStrides& s = side.planes[j];
    char plane[32];
    std::snprintf(plane, sizeof plane, "%s.planes[%d]", name, j);
    if (s.offset < 0 || s.page_stride < 0 || s.token_stride < 0 || s.head_stride < 0)
      return fail(Status::kErrorInvalidArgument,
                  "%s: offset and strides must be >= 0 (got %lld, %lld, %lld, %lld)",
                  plane, ll(s.offset), ll(s.page_stride), ll(s.token_stride),
                  ll(s.head_stride));
    int64_t extent = 0;
    CACHESTORE_RETURN_IF_ERROR(
        plane_extent(s, p.rows[j], side.num_pages, side.page_size, plane, &extent));
    if (side.plane_bases == nullptr)
      (*spans)[j] = {base + s.offset, extent, side.layer_stride, p.num_layers};
  }
  return Status::kSuccess;
}

}  // namespace

Status check(const MovePagesParams& p) {
  if (p.num_entries < 0 || p.num_entries > kMaxEntries)
    return fail(Status::kErrorInvalidArgument, "num_entries = %lld: must be in [0, 2^31 - 1]",
                ll(p.num_entries));
  if (!detail::aligned_to(p.num_entries_non_padded, 4))
    return fail(Status::kErrorMisalignedOperand, "num_entries_non_padded must be 4-byte aligned");
  if (!detail::aligned_to(p.diagnostics, 8))
    return fail(Status::kErrorMisalignedOperand, "diagnostics must be 8-byte aligned");
  if (!detail::aligned_to(p.checksums, 4) || !detail::aligned_to(p.expected_checksums, 4))
    return fail(Status::kErrorMisalignedOperand,
                "checksums and expected_checksums must be 4-byte aligned");
  if (p.num_layers < 1 || p.num_layers > kMaxMoveLayers)
    return fail(Status::kErrorInvalidArgument, "num_layers = %d: must be in [1, %d]",
                p.num_layers, kMaxMoveLayers);
  if (p.num_planes < 1 || p.num_planes > kMaxPagePlanes)
    return fail(Status::kErrorInvalidArgument, "num_planes = %d: must be in [1, %d]",
                p.num_planes, kMaxPagePlanes);
  for (int32_t j = 0; j < p.num_planes; ++j)
    if (p.rows[j].num_heads < 1 || p.rows[j].row_bytes < 1)
      return fail(Status::kErrorInvalidArgument,
                  "rows[%d] = {num_heads %d, row_bytes %d}: both must be >= 1", j,
                  p.rows[j].num_heads, p.rows[j].row_bytes);
  const int32_t ps = p.src.page_size, pd = p.dst.page_size;
  if (ps >= 1 && pd >= 1 && std::max(ps, pd) % std::min(ps, pd) != 0)
    return fail(Status::kErrorNotSupported,
                "src.page_size = %d and dst.page_size = %d: one must divide the other", ps, pd);
  int64_t dst_entries = 0;
  if (ps >= 1 && pd >= 1) {
    if (!detail::product_fits(p.num_entries, ps))
      return fail(Status::kErrorCapacityOverflow, "num_entries * src.page_size overflows int64");
    const int64_t tokens = p.num_entries * ps;
    if (tokens % pd != 0)
      return fail(Status::kErrorInvalidArgument,
                  "num_entries * src.page_size = %lld tokens do not fill whole destination "
                  "pages of %d tokens",
                  ll(tokens), pd);
    dst_entries = tokens / pd;
  }
  Spans src_spans{}, dst_spans{};
  CACHESTORE_RETURN_IF_ERROR(check_side(p, p.src, p.num_entries, "src", &src_spans));
  CACHESTORE_RETURN_IF_ERROR(check_side(p, p.dst, dst_entries, "dst", &dst_spans));
  for (int32_t i = 0; i < p.num_planes; ++i)
    for (int32_t j = 0; j < p.num_planes; ++j) {
      const PlaneSpan& s = src_spans[i];
      const PlaneSpan& d = dst_spans[j];
      const auto last = [](const PlaneSpan& x) {
        return static_cast<unsigned long long>(x.first + x.extent +
                                               x.stride * (x.layers - 1));
      };
      if (spans_overlap(s, d))
        return fail(Status::kErrorInvalidArgument,
                    "src and dst overlap (src.planes[%d] bytes [%#llx, %#llx), dst.planes[%d] "
                    "[%#llx, %#llx)): a copy within one cache goes through a staging buffer",
                    i, static_cast<unsigned long long>(s.first), last(s), j,
                    static_cast<unsigned long long>(d.first), last(d));
    }
  return detail::succeed();
}

}  // namespace cachestore
