#include "op_support.h"

#include <stdexcept>
#include <vector>

namespace cachestore::torch_ops {

void type_error(const std::string& message) {
  throw std::invalid_argument("TypeError: " + message);
}
void value_error(const std::string& message) { throw std::invalid_argument(message); }

void check_status(cachestore_status_t status) {
  if (status == CACHESTORE_SUCCESS) return;
  std::string message = std::string(cachestore_last_error_message()) + " [" +
                        cachestore_status_string(status) + "]";
  if (status == CACHESTORE_ERROR_ARCH_MISMATCH || status == CACHESTORE_ERROR_CUDA_RUNTIME)
    throw std::runtime_error(message);
  throw std::invalid_argument(message);
}

std::string dtype_name(ScalarType type) {
  switch (type) {
    case ScalarType::Byte: return "torch.uint8";
    case ScalarType::Char: return "torch.int8";
    case ScalarType::Short: return "torch.int16";
    case ScalarType::Int: return "torch.int32";
    case ScalarType::Long: return "torch.int64";
    case ScalarType::Half: return "torch.float16";
    case ScalarType::Float: return "torch.float32";
    case ScalarType::Double: return "torch.float64";
    case ScalarType::ComplexHalf: return "torch.complex32";
    case ScalarType::ComplexFloat: return "torch.complex64";
    case ScalarType::ComplexDouble: return "torch.complex128";
    case ScalarType::Bool: return "torch.bool";
    case ScalarType::BFloat16: return "torch.bfloat16";
    case ScalarType::Float8_e5m2: return "torch.float8_e5m2";
    case ScalarType::Float8_e4m3fn: return "torch.float8_e4m3fn";
    case ScalarType::Float8_e5m2fnuz: return "torch.float8_e5m2fnuz";
    case ScalarType::Float8_e4m3fnuz: return "torch.float8_e4m3fnuz";
    case ScalarType::UInt16: return "torch.uint16";
    case ScalarType::UInt32: return "torch.uint32";
    case ScalarType::UInt64: return "torch.uint64";
    default: return "torch dtype " + std::to_string(static_cast<int>(type));
  }
}

std::string tuple_string(torch::headeronly::IntHeaderOnlyArrayRef values) {
  std::string out = "(";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(values[i]);
  }
  return out + (values.size() == 1 ? ",)" : ")");
}

std::string device_string(const Tensor& t) {
  if (t.is_cpu()) return "cpu";
  if (t.is_cuda()) return "cuda:" + std::to_string(t.get_device_index());
  if (t.device().type() == torch::headeronly::DeviceType::Meta) return "meta";
  return "device type " + std::to_string(static_cast<int>(t.device().type()));
}

void check_tensor(const char* name, const Tensor& t, std::initializer_list<ScalarType> dtypes,
                  std::initializer_list<int64_t> ndims) {
  const ScalarType type = t.scalar_type();
  bool dtype_ok = false;
  for (ScalarType d : dtypes) dtype_ok = dtype_ok || d == type;
  if (!dtype_ok) {
    std::string expected;
    for (ScalarType d : dtypes) expected += (expected.empty() ? "" : " or ") + dtype_name(d);
    type_error(std::string(name) + ".dtype is " + dtype_name(type) + "; expected " + expected);
  }
  const int64_t dim = t.dim();
  bool dim_ok = false;
  for (int64_t n : ndims) dim_ok = dim_ok || n == dim;
  if (!dim_ok) {
    std::string expected;
    for (int64_t n : ndims) expected += (expected.empty() ? "" : " or ") + std::to_string(n);
    value_error(std::string(name) + " has " + std::to_string(dim) + " dimensions " +
                tuple_string(t.sizes()) + "; expected " + expected);
  }
}

void check_rows(const char* name, const Tensor& t, int64_t width) {
  check_tensor(name, t, {ScalarType::BFloat16}, {2});
  const int64_t columns = t.size(1);
  if (width >= 0 && columns != width)
    value_error(std::string(name) + " has " + std::to_string(columns) +
                " columns; the layout needs " + std::to_string(width));
  if (columns > 1 && t.stride(1) != 1)
    value_error(std::string(name) + " must have contiguous rows (stride(1) == 1), got " +
                tuple_string(t.strides()));
}

void check_slots(const char* name, const Tensor& t, int64_t rows) {
  check_tensor(name, t, {ScalarType::Int, ScalarType::Long}, {1});
  const int64_t entries = t.size(0);
  if (entries != rows)
    value_error(std::string(name) + " has " + std::to_string(entries) + " entries; the batch has " +
                std::to_string(rows) + " rows");
  if (entries > 1 && t.stride(0) != 1) value_error(std::string(name) + " must be contiguous");
}

bool check_page_table(const Tensor& slot_mapping, const PageTableTensors& t, int64_t rows) {
  const bool given[3] = {t.positions.has_value(), t.kv_indptr.has_value(),
                         t.kv_indices.has_value()};
  if (!given[0] && !given[1] && !given[2]) return false;
  if (!given[0] || !given[1] || !given[2])
    value_error("positions, kv_indptr and kv_indices go together (the page-table slot source; "
                "slot_mapping then holds the batch indices)");
  if (slot_mapping.scalar_type() != ScalarType::Int)
    type_error("slot_mapping.dtype is " + dtype_name(slot_mapping.scalar_type()) +
               "; with a page table it holds the batch indices: expected torch.int32");
  check_slots("positions", *t.positions, rows);
  for (const Named& n : {named("positions", t.positions), named("kv_indptr", t.kv_indptr),
                         named("kv_indices", t.kv_indices)}) {
    check_tensor(n.name, *n.tensor, {ScalarType::Int}, {1});
    if (n.tensor->size(0) > 1 && n.tensor->stride(0) != 1)
      value_error(std::string(n.name) + " must be contiguous");
  }
  if (t.kv_indptr->size(0) < 1)
    value_error("kv_indptr must hold batch + 1 entries (at least one)");
  return true;
}

cachestore_page_table_t page_table_of(const PageTableTensors& t) {
  cachestore_page_table_t table{};
  if (!t.positions.has_value()) return table;
  table.positions = static_cast<const int32_t*>(t.positions->data_ptr());
  table.indptr = static_cast<const int32_t*>(t.kv_indptr->data_ptr());
  table.indices = static_cast<const int32_t*>(t.kv_indices->data_ptr());
  table.batch_size = static_cast<int32_t>(t.kv_indptr->size(0) - 1);
  return table;
}

void check_paged_bytes(const char* name, const Tensor& t) {
  check_tensor(name, t, {ScalarType::Byte}, {2, 3, 4});
  const auto sizes = t.sizes();
  const auto strides = t.strides();
  int64_t expected = 1;
  for (int64_t i = static_cast<int64_t>(sizes.size()) - 1; i > 0; --i) {
    if (sizes[i] != 1 && strides[i] != expected)
      value_error(std::string(name) +
                  ": each page (dimensions 1..) must be contiguous, got strides " +
                  tuple_string(strides));
    expected *= sizes[i];
  }
}

int64_t page_bytes(const Tensor& t) {
  const auto sizes = t.sizes();
  int64_t size = 1;
  for (size_t i = 1; i < sizes.size(); ++i) size *= sizes[i];
  return size;
}

void check_id(const char* name, int64_t value, int64_t count) {
  if (value < 0 || value >= count)
    value_error(std::string(name) + " = " + std::to_string(value) + ": expected an id in [0, " +
                std::to_string(count) + ")");
}

bool check_rope_inputs(const RopeTensors& r, int64_t rounding, int64_t rows,
                       std::initializer_list<std::pair<const char*, bool>> only) {
  check_id("rope_rounding", rounding, 2);
  check_id("cos_sin_rows", r.cos_sin_rows, 2);
  check_id("cos_sin_layout", r.cos_sin_layout, 2);
  if (!r.cos_sin_cache.has_value()) {
    const auto refuse = [](const char* name, bool given) {
      if (given) value_error(std::string(name) + " given without cos_sin_cache (RoPE)");
    };
    refuse("rope_positions", r.positions.has_value());
    for (const auto& [name, given] : only) refuse(name, given);
    refuse("query", r.query.has_value());
    refuse("query_out", r.query_out.has_value());
    refuse("key_out", r.key_out.has_value());
    refuse("cos_sin_rows", r.cos_sin_rows != CACHESTORE_ROPE_COS_SIN_BY_POSITION);
    refuse("cos_sin_layout", r.cos_sin_layout != CACHESTORE_ROPE_COS_SIN_HALVES);
    return false;
  }
  const Tensor& cs = *r.cos_sin_cache;
  check_tensor("cos_sin_cache", cs, {ScalarType::BFloat16, ScalarType::Half, ScalarType::Float},
               {2});
  if (cs.stride(-1) != 1) value_error("cos_sin_cache: the last dimension must be contiguous");
  if (r.cos_sin_rows == CACHESTORE_ROPE_COS_SIN_BY_ROW) {
    if (r.positions.has_value())
      value_error("rope_positions given with cos_sin_rows 'by_row' (row i rotates by "
                  "cos_sin_cache row i)");
    if (cs.size(0) < rows)
      value_error("cos_sin_cache has " + std::to_string(cs.size(0)) +
                  " rows; cos_sin_rows 'by_row' needs one a row (" + std::to_string(rows) + ")");
    return true;
  }
  if (!r.positions.has_value()) value_error("rope_positions is required with cos_sin_cache");
  check_slots("rope_positions", *r.positions, rows);
  return true;
}

void check_like(const char* name, const Tensor& t, const char* like_name, const Tensor& like) {
  check_tensor(name, t, {like.scalar_type()}, {like.dim()});
  bool same = t.stride(-1) == 1;
  for (int64_t i = 0; same && i < like.dim(); ++i) same = t.size(i) == like.size(i);
  if (!same)
    value_error(std::string(name) + " " + tuple_string(t.sizes()) + " must have " + like_name +
                "'s shape " + tuple_string(like.sizes()) + ", the last dimension contiguous");
}

void check_rope_outputs(const RopeTensors& r, int64_t rows, int64_t head_dim, ScalarType dtype,
                        std::initializer_list<int64_t> query_ndims, const char* key_name,
                        const Tensor& key) {
  if (r.query.has_value()) {
    const Tensor& q = *r.query;
    check_tensor("query", q, {dtype}, query_ndims);
    if (q.stride(-1) != 1) value_error("query: the last dimension must be contiguous");
    if (q.size(0) != rows || q.size(-1) != head_dim)
      value_error("query " + tuple_string(q.sizes()) + " must be [" + std::to_string(rows) +
                  ", heads, " + std::to_string(head_dim) + "]");
  } else if (r.query_out.has_value()) {
    value_error("query_out given without query");
  }
  if (r.query_out.has_value()) check_like("query_out", *r.query_out, "query", *r.query);
  if (r.key_out.has_value()) check_like("key_out", *r.key_out, key_name, key);
}

int32_t input_type_of(ScalarType t) {
  return t == ScalarType::BFloat16 ? CACHESTORE_KV_BF16
         : t == ScalarType::Half   ? CACHESTORE_KV_FP16
                                   : CACHESTORE_KV_FP32;
}

cachestore_rope_t rope_struct(const RopeTensors& r, int32_t rotary_dim, bool is_neox,
                              int64_t rounding) {
  cachestore_rope_t out{};
  if (!r.cos_sin_cache.has_value()) return out;
  const Tensor& cs = *r.cos_sin_cache;
  if (r.positions.has_value()) {
    out.positions = r.positions->data_ptr();
    out.positions_type = r.positions->scalar_type() == ScalarType::Int ? CACHESTORE_SLOT_INT32
                                                                        : CACHESTORE_SLOT_INT64;
  }
  out.cos_sin_rows = static_cast<int32_t>(r.cos_sin_rows);
  out.cos_sin_layout = static_cast<int32_t>(r.cos_sin_layout);
  out.cos_sin_type = input_type_of(cs.scalar_type());
  out.cos_sin_cache = cs.data_ptr();
  out.cos_sin_stride = cs.stride(0);
  out.max_position = cs.size(0);
  out.rotary_dim = rotary_dim;
  out.style = is_neox ? CACHESTORE_ROPE_NEOX : CACHESTORE_ROPE_GPTJ;
  out.rounding = static_cast<int32_t>(rounding);
  const auto strides = [](const Tensor& t, int64_t* token, int64_t* head) {
    *token = t.stride(0);
    *head = t.dim() == 3 ? t.stride(1) : t.size(-1);
    return t.data_ptr();
  };
  if (r.query.has_value()) {
    out.num_query_heads = static_cast<int32_t>(r.query->dim() == 3 ? r.query->size(1) : 1);
    out.query = strides(*r.query, &out.query_token_stride, &out.query_head_stride);
  }
  if (r.query_out.has_value())
    out.query_out = strides(*r.query_out, &out.query_out_token_stride,
                            &out.query_out_head_stride);
  if (r.key_out.has_value())
    out.key_out = strides(*r.key_out, &out.key_out_token_stride, &out.key_out_head_stride);
  return out;
}

void check_options(const BatchOptions& o, int64_t counters) {
  if (o.num_tokens_non_padded.has_value()) {
    const Tensor& n = *o.num_tokens_non_padded;
    check_tensor("num_tokens_non_padded", n, {ScalarType::Int}, {0, 1});
    if (n.numel() != 1)
      value_error("num_tokens_non_padded must hold one int32 (the real row count)");
  }
  if (o.diagnostics.has_value()) {
    const Tensor& d = *o.diagnostics;
    check_tensor("diagnostics", d, {ScalarType::Long, ScalarType::UInt64}, {1});
    if (d.numel() != counters || !d.is_contiguous())
      value_error("diagnostics must be a contiguous int64 tensor of " +
                  std::to_string(counters) + " counters");
  }
  if (o.owner_size < 1 || (o.owner_size & (o.owner_size - 1)) != 0)
    value_error("owner_size = " + std::to_string(o.owner_size) +
                ": must be a power of two >= 1");
  if (o.owner_rank < 0 || o.owner_rank >= o.owner_size)
    value_error("owner_rank = " + std::to_string(o.owner_rank) +
                ": must be in [0, owner_size = " + std::to_string(o.owner_size) + ")");
}

void no_page_size(const char* name, int64_t bytes) {
  value_error(std::string(name) + ": no page size has exactly " + std::to_string(bytes) +
              " bytes per page in this layout; pass page_size= (the page may be padded)");
}

int32_t same_device(std::initializer_list<Named> tensors) {
  const Named* first = nullptr;
  int32_t index = -1;
  for (const Named& n : tensors) {
    if (n.tensor == nullptr) continue;
    if (!n.tensor->is_cuda())
      value_error(std::string(n.name) + " is on " + device_string(*n.tensor) +
                  "; cachestore stores run on CUDA tensors");
    if (first == nullptr) {
      first = &n;
      index = n.tensor->get_device_index();
    } else if (n.tensor->get_device_index() != index) {
      value_error(std::string(n.name) + " is on " + device_string(*n.tensor) +
                  ", the other tensors on " + device_string(*first->tensor));
    }
  }
  return index;
}

cachestore_slots_t slots_of(const Tensor& t, int64_t reserved_slot, int64_t owner_rank,
                            int64_t owner_size, bool page_table) {
  cachestore_slots_t s{};
  s.data = t.data_ptr();
  s.slot_type = page_table                          ? CACHESTORE_SLOT_PAGE_TABLE
                : t.scalar_type() == ScalarType::Int ? CACHESTORE_SLOT_INT32
                                                     : CACHESTORE_SLOT_INT64;
  s.owner_rank = static_cast<int32_t>(owner_rank);
  s.reserved_slot = reserved_slot;
  s.owner_size = static_cast<int32_t>(owner_size);
  return s;
}

bool is_current_device(int32_t device) {
  return torch::stable::accelerator::getCurrentDeviceIndex() == device;
}

void* current_stream(int32_t device) {
  void* stream = nullptr;
  TORCH_ERROR_CODE_CHECK(aoti_torch_get_current_cuda_stream(device, &stream));
  return stream;
}

}  // namespace cachestore::torch_ops

namespace {

// What this build of the ops is: the torch headers it compiled against, the stable ABI version
// it targets, the cachestore C ABI version it was built with.
std::vector<int64_t> native_info() {
  return {TORCH_VERSION_MAJOR, TORCH_VERSION_MINOR, TORCH_VERSION_PATCH,
          static_cast<int64_t>(TORCH_TARGET_VERSION >> 56),
          static_cast<int64_t>((TORCH_TARGET_VERSION >> 48) & 0xff), cachestore_version()};
}

}  // namespace

STABLE_TORCH_LIBRARY_FRAGMENT(cachestore, m) { m.def("native_info() -> int[]"); }
STABLE_TORCH_LIBRARY_IMPL(cachestore, CompositeExplicitAutograd, m) {
  m.impl("native_info", TORCH_BOX(&native_info));
}
