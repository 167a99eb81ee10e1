// What every native torch op shares: the tensor checks of cachestore.torch (the same messages
// as python/cachestore/torch/_checks.py, word for word, in the same order), the batch options,
// the C params they fill, the launch on the tensors' device and current stream, and how a
// refusal reaches Python.
//
// Built against PyTorch's stable ABI only (torch/csrc/stable, TORCH_TARGET_VERSION 2.10), so
// one build loads in every torch >= 2.10.
//
// Refusals are C++ exceptions that torch turns into Python ones: std::invalid_argument becomes
// ValueError. The stable ABI has no way to raise a TypeError, so a type refusal is a
// ValueError whose message starts with "TypeError: "; a refusal of the library (its check
// layer) ends with " [kError...]", its status. cachestore.torch re-raises both as TypeError and
// cachestore.CachestoreError. A CUDA failure is a RuntimeError ending with its status. A torch
// that turns every C++ exception of an op into a RuntimeError gives the same Python types
// through cachestore.torch, which reads the words and the status (_store.typed_error).
#pragma once

#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/tensor.h>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>

#include "cachestore/cachestore_c.h"

namespace cachestore::torch_ops {

using torch::stable::Tensor;
using ScalarType = torch::headeronly::ScalarType;
using OptTensor = std::optional<Tensor>;

[[noreturn]] void type_error(const std::string& message);
[[noreturn]] void value_error(const std::string& message);
// After a C call: the library's refusal (ValueError) or CUDA failure (RuntimeError).
void check_status(cachestore_status_t status);

// Python's spelling of a dtype ("torch.bfloat16"), a shape or strides ("(4, 128)", "(4,)"), a
// device ("cuda:0", "cpu").
std::string dtype_name(ScalarType type);
std::string tuple_string(torch::headeronly::IntHeaderOnlyArrayRef values);
std::string device_string(const Tensor& t);

void check_tensor(const char* name, const Tensor& t, std::initializer_list<ScalarType> dtypes,
                  std::initializer_list<int64_t> ndims);
// A [rows, width] bf16 matrix with contiguous rows; width < 0: any.
void check_rows(const char* name, const Tensor& t, int64_t width = -1);
void check_slots(const char* name, const Tensor& t, int64_t rows);
// The page-table slot source (FlashInfer's form): slot_mapping holds each row's int32 batch
// index; positions [rows], kv_indptr [batch + 1] and kv_indices int32. Whether one is given.
struct PageTableTensors {
  const OptTensor& positions;
  const OptTensor& kv_indptr;
  const OptTensor& kv_indices;
};
bool check_page_table(const Tensor& slot_mapping, const PageTableTensors& t, int64_t rows);
// The C page table of `t`; all zero when none is given.
cachestore_page_table_t page_table_of(const PageTableTensors& t);
// A byte cache: uint8 [num_pages, ...], each page's bytes contiguous (any page stride).
void check_paged_bytes(const char* name, const Tensor& t);
int64_t page_bytes(const Tensor& t);
// An op-level enum argument: its value must be one of `count` ids 0 .. count - 1.
void check_id(const char* name, int64_t value, int64_t count);

// RoPE in a store: the tensors of its rotation (absent without RoPE).
struct RopeTensors {
  const OptTensor& query;
  const OptTensor& cos_sin_cache;
  const OptTensor& positions;  // rope_positions
  const OptTensor& query_out;
  const OptTensor& key_out;
  int64_t cos_sin_rows = CACHESTORE_ROPE_COS_SIN_BY_POSITION;  // fused_store_cache's options
  int64_t cos_sin_layout = CACHESTORE_ROPE_COS_SIN_HALVES;
};
// The rounding id, then (cos_sin_cache given) the cos/sin cache and rope_positions (none with
// a cos/sin row a row, which needs a row of the cache per row); without it, each of `only` (a
// RoPE-only argument and whether it is given) and the other RoPE arguments must be absent.
// Whether the store rotates.
bool check_rope_inputs(const RopeTensors& r, int64_t rounding, int64_t rows,
                       std::initializer_list<std::pair<const char*, bool>> only);
// Q ([rows, heads, head_dim] of `dtype`), query_out (Q's shape) and key_out (`key`'s shape).
void check_rope_outputs(const RopeTensors& r, int64_t rows, int64_t head_dim, ScalarType dtype,
                        std::initializer_list<int64_t> query_ndims, const char* key_name,
                        const Tensor& key);
// `t` must have the shape and dtype of `like` (an output beside its input).
void check_like(const char* name, const Tensor& t, const char* like_name, const Tensor& like);
// CACHESTORE_KV_BF16 | _FP16 | _FP32 of a floating dtype.
int32_t input_type_of(ScalarType t);
// The C RoPE description (all zero without cos_sin_cache).
cachestore_rope_t rope_struct(const RopeTensors& r, int32_t rotary_dim, bool is_neox,
                              int64_t rounding);

// The options every store takes after its tensors.
struct BatchOptions {
  const OptTensor& num_tokens_non_padded;
  int64_t reserved_slot;
  int64_t owner_rank;
  int64_t owner_size;
  const OptTensor& diagnostics;
  bool enable_pdl;
};
// `counters`: the diagnostics the store writes (3 with RoPE).
void check_options(const BatchOptions& o, int64_t counters = 2);

// `page_size` if given, else the power of two whose minimum page (min_bytes(P), the library's
// layout table) is exactly the cache's bytes per page.
template <class MinBytes>
int32_t infer_page_size(const char* name, std::optional<int64_t> page_size, const Tensor& t,
                        MinBytes min_bytes);
[[noreturn]] void no_page_size(const char* name, int64_t bytes);

// The tensors a store reads or writes, by name; a null entry is an absent optional.
struct Named {
  const char* name;
  const Tensor* tensor;
};
inline Named named(const char* name, const Tensor& t) { return {name, &t}; }
inline Named named(const char* name, const OptTensor& t) {
  return {name, t.has_value() ? &*t : nullptr};
}
// All on one CUDA device: its index (else the ValueError of cachestore.torch).
int32_t same_device(std::initializer_list<Named> tensors);

inline const void* ptr(const OptTensor& t) { return t.has_value() ? t->data_ptr() : nullptr; }

template <class Params>
void batch_fields(Params& p, int64_t rows, const BatchOptions& o) {
  p.num_tokens = rows;
  p.num_tokens_non_padded = static_cast<const int32_t*>(ptr(o.num_tokens_non_padded));
  p.diagnostics = const_cast<void*>(ptr(o.diagnostics));
  p.enable_pdl = o.enable_pdl ? 1 : 0;
}
// `t` as the slots: a mapping of its dtype, or (page_table) a page table's batch indices.
cachestore_slots_t slots_of(const Tensor& t, int64_t reserved_slot, int64_t owner_rank = 0,
                            int64_t owner_size = 1, bool page_table = false);

// Calls `store(&params, stream)` on `device`'s current torch stream, with that device current.
template <class Params>
void launch(cachestore_status_t (*store)(const Params*, void*), const Params& params,
            int32_t device);

// The schema of the batch options of a paged store (diagnostics alias letter given), then its
// page-table slot source: appended last, so that positional calls of earlier releases still
// bind.
#define CACHESTORE_BATCH_SCHEMA(diagnostics_alias)                               \
  "Tensor? num_tokens_non_padded=None, int reserved_slot=-1, int owner_rank=0, " \
  "int owner_size=1, Tensor(" diagnostics_alias "!)? diagnostics=None, bool enable_pdl=False, " \
  "Tensor? positions=None, Tensor? kv_indptr=None, Tensor? kv_indices=None"

// Registers an op family's kernels, `impls(m)`, for CUDA tensors and for CPU tensors (which get
// the checks, then the device refusal naming the first CPU tensor).
#define CACHESTORE_TORCH_KERNELS(impls)                                  \
  STABLE_TORCH_LIBRARY_IMPL(cachestore, CUDA, m) { impls(m); }          \
  STABLE_TORCH_LIBRARY_IMPL(cachestore, CPU, m) { impls(m); }
using Library = torch::stable::detail::StableLibrary;

// ---- templates ---------------------------------------------------------------------------------
inline constexpr int32_t kMaxPow2Page = 1024;

template <class MinBytes>
int32_t infer_page_size(const char* name, std::optional<int64_t> page_size, const Tensor& t,
                        MinBytes min_bytes) {
  if (page_size.has_value()) return static_cast<int32_t>(*page_size);
  const int64_t bytes = page_bytes(t);
  for (int32_t p = 1; p <= kMaxPow2Page; p *= 2)
    if (min_bytes(p) == bytes) return p;
  no_page_size(name, bytes);
}

bool is_current_device(int32_t device);
void* current_stream(int32_t device);

template <class Params>
void launch(cachestore_status_t (*store)(const Params*, void*), const Params& params,
            int32_t device) {
  if (is_current_device(device)) {
    check_status(store(&params, current_stream(device)));
  } else {  // the stream belongs to `device`: launch with it current, as torch's own ops do
    torch::stable::accelerator::DeviceGuard guard(device);
    check_status(store(&params, current_stream(device)));
  }
}

}  // namespace cachestore::torch_ops
