// torch.ops.cachestore.move_pages: the sides as lists of byte views, one per layer and plane
// (python/cachestore/move.py builds them from caches and staging buffers); the checks here, the
// library's behind them.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "op_support.h"

namespace cachestore::torch_ops {
namespace {

uintptr_t address(const Tensor& t) { return reinterpret_cast<uintptr_t>(t.data_ptr()); }

bool same_geometry(const Tensor& a, const Tensor& b) {
  for (int64_t d = 0; d < 4; ++d)
    if (a.size(d) != b.size(d) || (a.size(d) > 1 && a.stride(d) != b.stride(d))) return false;
  return true;
}

// A side's views: layer-major, `planes` a layer, each uint8 [pages, page_size, heads, row]
// with contiguous rows; the planes of every layer alike, the layers one stride apart unless
// plane_bases gives their bases.
cachestore_page_side_t side_struct(const char* name, const std::vector<Tensor>& views,
                                   int64_t planes, const OptTensor& plane_bases,
                                   const OptTensor& ids) {
  const std::string side(name);
  if (views.empty() || static_cast<int64_t>(views.size()) % planes != 0)
    value_error(side + " has " + std::to_string(views.size()) +
                " views; expected a positive multiple of num_planes = " + std::to_string(planes));
  const int64_t layers = static_cast<int64_t>(views.size()) / planes;
  cachestore_page_side_t s{};
  for (int64_t i = 0; i < static_cast<int64_t>(views.size()); ++i) {
    const Tensor& v = views[i];
    const std::string at = side + "[" + std::to_string(i) + "]";
    check_tensor(at.c_str(), v, {ScalarType::Byte}, {4});
    if (v.size(3) > 1 && v.stride(3) != 1)
      value_error(at + " must have contiguous rows (last stride 1), got strides " +
                  tuple_string(v.strides()));
    const Tensor& first = views[i % planes];
    const Tensor& plane0 = views[0];
    if (v.size(0) != plane0.size(0) || v.size(1) != plane0.size(1))
      value_error(at + " is " + tuple_string(v.sizes()) + "; every view of " + side +
                  " has its pages and page size, " + tuple_string(plane0.sizes()));
    if (i >= planes && !same_geometry(v, first))
      value_error(at + " is " + tuple_string(v.sizes()) + " strides " +
                  tuple_string(v.strides()) + "; plane " + std::to_string(i % planes) +
                  " of layer 0 is " + tuple_string(first.sizes()) + " strides " +
                  tuple_string(first.strides()));
  }
  uintptr_t base = address(views[0]);
  for (int64_t j = 1; j < planes; ++j) base = std::min(base, address(views[j]));
  if (plane_bases.has_value()) {
    check_tensor((side + "_plane_bases").c_str(), *plane_bases, {ScalarType::Long}, {1});
    if (plane_bases->size(0) != static_cast<int64_t>(views.size()) ||
        !plane_bases->is_contiguous())
      value_error(side + "_plane_bases must be contiguous [" + std::to_string(views.size()) +
                  "] (a base per view), got " + tuple_string(plane_bases->sizes()));
    for (const Tensor& v : views)
      if (address(v) % 16 != 0)
        value_error(side + ": with plane_bases every view must start 16-byte aligned");
    s.plane_bases = static_cast<const uint64_t*>(plane_bases->data_ptr());
  } else if (layers > 1) {
    const int64_t stride = static_cast<int64_t>(address(views[planes]) - address(views[0]));
    for (int64_t i = planes; i < static_cast<int64_t>(views.size()); ++i)
      if (stride <= 0 ||
          static_cast<int64_t>(address(views[i]) - address(views[i % planes])) !=
              stride * (i / planes))
        value_error(side + ": its layers are not one positive stride apart in memory (separate "
                    "allocations); pass " + side + "_plane_bases (cachestore.move.Pages builds "
                    "it)");
    s.layer_stride = stride;
  }
  s.data = reinterpret_cast<void*>(base);
  s.num_pages = views[0].size(0);
  s.page_size = static_cast<int32_t>(views[0].size(1));
  for (int64_t j = 0; j < planes; ++j) {
    const Tensor& v = views[j];
    // With plane_bases each view's own address is its base: no offset on top.
    const int64_t offset = plane_bases.has_value() ? 0 : static_cast<int64_t>(address(v) - base);
    s.planes[j] = {offset, v.stride(0), v.stride(1), v.stride(2)};
  }
  if (ids.has_value()) {
    const std::string ids_name = side + "_page_ids";
    check_tensor(ids_name.c_str(), *ids, {ScalarType::Int, ScalarType::Long}, {1});
    if (ids->size(0) > 1 && ids->stride(0) != 1)
      value_error(ids_name + " must be contiguous");
    s.page_ids = ids->data_ptr();
    s.page_ids_type =
        ids->scalar_type() == ScalarType::Int ? CACHESTORE_SLOT_INT32 : CACHESTORE_SLOT_INT64;
  }
  return s;
}

// The CUDA device of the move: every CUDA tensor's (the sides may also be pinned host memory,
// which the library checks; the other tensors must be CUDA tensors).
int32_t move_device(const std::vector<Tensor>& src, const std::vector<Tensor>& dst,
                    std::initializer_list<Named> others) {
  int32_t device = -1;
  std::string first;
  const auto see = [&](const std::string& name, const Tensor& t, bool host_ok) {
    if (!t.is_cuda()) {
      if (!host_ok)
        value_error(name + " is on " + device_string(t) + "; it must be a CUDA tensor");
      return;
    }
    if (device < 0) {
      device = t.get_device_index();
      first = name;
    } else if (t.get_device_index() != device) {
      value_error(name + " is on " + device_string(t) + ", " + first + " on cuda:" +
                  std::to_string(device));
    }
  };
  for (size_t i = 0; i < src.size(); ++i) see("src[" + std::to_string(i) + "]", src[i], true);
  for (size_t i = 0; i < dst.size(); ++i) see("dst[" + std::to_string(i) + "]", dst[i], true);
  for (const Named& n : others)
    if (n.tensor != nullptr) see(n.name, *n.tensor, false);
  return device;  // >= 0: the page ids, required before this, are CUDA tensors
}

void move_pages(std::vector<Tensor> src, std::vector<Tensor> dst, int64_t num_planes,
                OptTensor src_page_ids, OptTensor dst_page_ids,
                OptTensor num_entries_non_padded, OptTensor diagnostics, bool enable_pdl,
                OptTensor src_plane_bases, OptTensor dst_plane_bases, OptTensor checksums,
                OptTensor expected_checksums) {
  if (num_planes < 1 || num_planes > CACHESTORE_MAX_PAGE_PLANES)
    value_error("num_planes = " + std::to_string(num_planes) + ": must be in [1, " +
                std::to_string(CACHESTORE_MAX_PAGE_PLANES) + "]");
  cachestore_move_pages_params_t p;
  CACHESTORE_PARAMS_INIT(p);
  p.src = side_struct("src", src, num_planes, src_plane_bases, src_page_ids);
  p.dst = side_struct("dst", dst, num_planes, dst_plane_bases, dst_page_ids);
  if (src.size() != dst.size())
    value_error("src has " + std::to_string(src.size()) + " views and dst " +
                std::to_string(dst.size()) + "; both a view per layer and plane");
  for (int64_t j = 0; j < num_planes; ++j) {
    if (src[j].size(2) != dst[j].size(2) || src[j].size(3) != dst[j].size(3))
      value_error("plane " + std::to_string(j) + ": src rows are " + tuple_string(src[j].sizes()) +
                  " and dst rows " + tuple_string(dst[j].sizes()) +
                  "; [heads, row bytes] (the last two sizes) must agree");
    p.num_heads[j] = static_cast<int32_t>(src[j].size(2));
    p.row_bytes[j] = static_cast<int32_t>(src[j].size(3));
  }
  const int64_t ps = p.src.page_size, pd = p.dst.page_size;
  if (src_page_ids.has_value()) {
    p.num_entries = src_page_ids->size(0);
  } else if (dst_page_ids.has_value()) {
    if ((dst_page_ids->size(0) * pd) % ps != 0)
      value_error("dst_page_ids holds " + std::to_string(dst_page_ids->size(0)) +
                  " pages of " + std::to_string(pd) + " tokens: not whole source pages of " +
                  std::to_string(ps));
    p.num_entries = dst_page_ids->size(0) * pd / ps;
  } else {
    value_error("give src_page_ids, dst_page_ids or both (the entries to move)");
  }
  if (dst_page_ids.has_value() && dst_page_ids->size(0) * pd != p.num_entries * ps)
    value_error("dst_page_ids holds " + std::to_string(dst_page_ids->size(0)) + " pages of " +
                std::to_string(pd) + " tokens; the " + std::to_string(p.num_entries) +
                " source entries of " + std::to_string(ps) + " tokens need " +
                std::to_string(p.num_entries * ps / pd));
  if (num_entries_non_padded.has_value()) {
    check_tensor("num_entries_non_padded", *num_entries_non_padded, {ScalarType::Int}, {1});
    if (num_entries_non_padded->size(0) != 1)
      value_error("num_entries_non_padded must hold one int32");
  }
  const int64_t counters = expected_checksums.has_value() ? 3 : 2;
  if (diagnostics.has_value()) {
    check_tensor("diagnostics", *diagnostics, {ScalarType::Long}, {1});
    if (diagnostics->size(0) < counters || diagnostics->stride(0) != 1)
      value_error("diagnostics must be a contiguous int64 tensor of at least " +
                  std::to_string(counters) + " counters" +
                  (counters == 3 ? " (checksum_mismatches with expected_checksums)" : ""));
  }
  const int64_t blocks =
      p.num_entries * static_cast<int64_t>(src.size());  // entries x layers x planes
  for (const Named& n : {named("checksums", checksums),
                         named("expected_checksums", expected_checksums)}) {
    if (n.tensor == nullptr) continue;
    check_tensor(n.name, *n.tensor, {ScalarType::Int}, {1, 2, 3});
    if (n.tensor->numel() != blocks || !n.tensor->is_contiguous())
      value_error(std::string(n.name) + " must be a contiguous int32 tensor of " +
                  std::to_string(blocks) + " elements (entries " +
                  std::to_string(p.num_entries) + " x layers x planes), got " +
                  tuple_string(n.tensor->sizes()));
  }
  const int32_t device =
      move_device(src, dst,
                  {named("src_page_ids", src_page_ids), named("dst_page_ids", dst_page_ids),
                   named("num_entries_non_padded", num_entries_non_padded),
                   named("diagnostics", diagnostics), named("src_plane_bases", src_plane_bases),
                   named("dst_plane_bases", dst_plane_bases), named("checksums", checksums),
                   named("expected_checksums", expected_checksums)});
  p.num_layers = static_cast<int32_t>(src.size() / num_planes);
  p.num_planes = static_cast<int32_t>(num_planes);
  p.num_entries_non_padded = static_cast<const int32_t*>(ptr(num_entries_non_padded));
  p.diagnostics = const_cast<void*>(ptr(diagnostics));
  p.enable_pdl = enable_pdl ? 1 : 0;
  p.checksums = const_cast<void*>(ptr(checksums));
  p.expected_checksums = ptr(expected_checksums);
  launch(cachestore_move_pages, p, device);
}

}  // namespace
}  // namespace cachestore::torch_ops

using namespace cachestore::torch_ops;  // NOLINT: the registration below names the op

STABLE_TORCH_LIBRARY_FRAGMENT(cachestore, m) {
  m.def("move_pages(Tensor[] src, Tensor(a!)[] dst, int num_planes, Tensor? src_page_ids=None, "
        "Tensor? dst_page_ids=None, Tensor? num_entries_non_padded=None, "
        "Tensor(b!)? diagnostics=None, bool enable_pdl=False, Tensor? src_plane_bases=None, "
        "Tensor? dst_plane_bases=None, Tensor(c!)? checksums=None, "
        "Tensor? expected_checksums=None) -> ()");
}
void move_kernels(Library& m) { m.impl("move_pages", TORCH_BOX(&move_pages)); }
CACHESTORE_TORCH_KERNELS(move_kernels)
