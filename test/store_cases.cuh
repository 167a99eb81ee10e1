// StoreCase: one entry point with its buffers on both sides, for the sweeps, the guard tests,
// the padded-replay graphs and the PDL test. The same params struct is built twice, once with
// device pointers for the library and once with host pointers for the reference.
#pragma once

#include <optional>

#include "cachestore/layout.h"
#include "gpu_support.cuh"
#include "page_table_source.cuh"
#include "reference/reference.h"
#include "rope_operands.h"

namespace cachestore::test {

enum class StoreKind {
  kIndexKBf16,
  kIndexKFp8Amax,
  kIndexKFp8Pow2,
  kV4,
  kV32Pow2,
  kV32Amax,
  kFusedV4Index,
  kFusedV32Index,
  kIndexKFp4Even,        // fp4 index-K, ties to even
  kIndexKFp4TowardZero,  // fp4 index-K, ties toward zero
  kV41,
  kV41Fp4,
  kFusedV41IndexFp4,     // V41 with the fp4 index-K (ties toward zero)
  kFusedV41Fp4IndexFp8,  // V41_FP4 with the fp8 index-K (amax)
};

inline const char* store_kind_name(StoreKind kind) {
  switch (kind) {
    case StoreKind::kIndexKBf16: return "IndexKBf16";
    case StoreKind::kIndexKFp8Amax: return "IndexKFp8Amax";
    case StoreKind::kIndexKFp8Pow2: return "IndexKFp8Pow2";
    case StoreKind::kV4: return "V4";
    case StoreKind::kV32Pow2: return "V32Pow2";
    case StoreKind::kV32Amax: return "V32Amax";
    case StoreKind::kFusedV4Index: return "FusedV4Index";
    case StoreKind::kFusedV32Index: return "FusedV32Index";
    case StoreKind::kIndexKFp4Even: return "IndexKFp4Even";
    case StoreKind::kIndexKFp4TowardZero: return "IndexKFp4TowardZero";
    case StoreKind::kV41: return "V41";
    case StoreKind::kV41Fp4: return "V41Fp4";
    case StoreKind::kFusedV41IndexFp4: return "FusedV41IndexFp4";
    case StoreKind::kFusedV41Fp4IndexFp8: return "FusedV41Fp4IndexFp8";
  }
  return "?";
}

inline void PrintTo(StoreKind kind, std::ostream* os) { *os << store_kind_name(kind); }

inline bool is_index_only(StoreKind k) {
  return k == StoreKind::kIndexKBf16 || k == StoreKind::kIndexKFp8Amax ||
         k == StoreKind::kIndexKFp8Pow2 || k == StoreKind::kIndexKFp4Even ||
         k == StoreKind::kIndexKFp4TowardZero;
}
inline bool has_fused_index(StoreKind k) {
  return k == StoreKind::kFusedV4Index || k == StoreKind::kFusedV32Index ||
         k == StoreKind::kFusedV41IndexFp4 || k == StoreKind::kFusedV41Fp4IndexFp8;
}
// The index-K (standalone or fused) is the fp4 layout.
inline bool has_fp4_index(StoreKind k) {
  return k == StoreKind::kIndexKFp4Even || k == StoreKind::kIndexKFp4TowardZero ||
         k == StoreKind::kFusedV41IndexFp4;
}
inline MlaLayout mla_layout_of(StoreKind k) {
  switch (k) {
    case StoreKind::kV32Pow2:
    case StoreKind::kV32Amax:
    case StoreKind::kFusedV32Index: return MlaLayout::kV32;
    case StoreKind::kV41:
    case StoreKind::kFusedV41IndexFp4: return MlaLayout::kV41;
    case StoreKind::kV41Fp4:
    case StoreKind::kFusedV41Fp4IndexFp8: return MlaLayout::kV41Fp4;
    default: return MlaLayout::kV4;
  }
}

// fused_store_cache with RoPE (FusedStoreParams::rotary): off unless `on`. Q is DeepSeek's
// q_pe, the last 64 of each head's 192 values.
struct MlaRotary {
  bool on = false;
  RopeStyle style = RopeStyle::kGptj;
  RopeRounding rounding = RopeRounding::kInputType;
  int32_t q_heads = 0;             // 0: no Q
  bool q_out_of_place = false;     // into its own (poisoned) [rows, heads, 64], else in place
  bool key_out = false;            // the rotated RoPE part into its own (poisoned) buffer
  bool key_out_in_place = false;   // ... or into the RoPE input itself
  KvDataType cos_sin_type = KvDataType::kFp32;
  SlotType positions_type = SlotType::kInt64;
  int64_t max_position = 4096;
  bool by_row = false;             // a cos/sin row a row (RopeCosSinRows::kByRow): no positions
  bool interleaved = false;        // each pair's cos and sin side by side (kInterleaved)
};
inline constexpr int64_t kQHeadDim = 192;  // q_nope 128 | q_pe 64
inline constexpr int64_t kQPeOffset = 128;

struct CaseShape {
  int64_t num_tokens = 64;
  int32_t page_size = 64;
  int32_t head_dim = 128;        // index-K (bf16 or fp8)
  bool strided = false;          // inputs and (bf16) cache rows with padding; padded pages
  SlotType slot_type = SlotType::kInt64;  // kPageTable: the slots through a page table
  int64_t reserved_slot = kNoReservedSlot;
  bool count_on_device = true;   // false: num_tokens_non_padded = nullptr
  bool shared_slots = false;     // fused: index_slots is the kv_slots array
  int32_t owner_rank = 0;        // page-owner sharding of the paged caches
  int32_t owner_size = 1;
  int64_t mla_row_stride = 0;    // one-row MLA batches: the nope / rope row stride passed (never
                                 // multiplied; may exceed the 32 bits MlaArgs keeps), 0: as built
  MlaRotary rotary;              // MLA stores only
};

class StoreCase {
 public:
  StoreCase(StoreKind kind, const CaseShape& shape) : kind_(kind), shape_(shape) {
    const int64_t b = shape.num_tokens;
    const int32_t p = shape.page_size;
    const int64_t pages = (b + 24) / p + 2;  // room for distinct slots plus the reserved one
    capacity_ = pages * p;
    const int64_t pad = shape.strided ? 24 : 0;  // elements; keeps 16-byte alignment
    const int64_t page_pad = shape.strided ? 48 : 0;

    if (kind == StoreKind::kIndexKBf16) {
      k_stride_ = shape.head_dim + pad;
      cache_stride_ = shape.head_dim + pad;
      k_ = &sc_.input(std::vector<uint8_t>(2 * b * k_stride_));
      cache_ = &sc_.output(2 * capacity_ * cache_stride_, kPoison, "bf16 cache");
    } else if (is_index_only(kind)) {
      k_stride_ = shape.head_dim + pad;
      k_ = &sc_.input(std::vector<uint8_t>(2 * b * k_stride_));
      index_stride_ = index_min_page_stride() + page_pad;
      cache_ = &sc_.output(pages * index_stride_, kPoison, "index-K cache");
    } else {
      const MlaLayout mla = mla_layout_of(kind);
      nope_dim_ = layout::mla_layout(mla).nope_dim;
      nope_stride_ = nope_dim_ + pad;
      rope_stride_ = layout::kRopeDim + pad;
      nope_ = &sc_.input(std::vector<uint8_t>(2 * b * nope_stride_));
      const MlaRotary& r = shape.rotary;
      // Rotated in place, the RoPE input is an output (uploaded when randomized).
      rope_ = r.on && r.key_out_in_place
                  ? &sc_.output(2 * b * rope_stride_, 0, "RoPE input (rotated in place)")
                  : &sc_.input(std::vector<uint8_t>(2 * b * rope_stride_));
      if (r.on) {
        positions_ = &sc_.input(std::vector<uint8_t>(8 * b));
        cos_sin_ = &sc_.input(cos_sin_table(r.cos_sin_type, r.max_position, layout::kRopeDim));
        const size_t q_bytes = static_cast<size_t>(2 * b * r.q_heads * kQHeadDim);
        if (r.q_heads > 0 && r.q_out_of_place) {
          q_ = &sc_.input(std::vector<uint8_t>(q_bytes));
          q_out_ = &sc_.output(static_cast<size_t>(2 * b * r.q_heads * layout::kRopeDim),
                               kPoison, "Q out");
        } else if (r.q_heads > 0) {
          q_ = q_out_ = &sc_.output(q_bytes, 0, "Q (q_pe in place)");
        }
        if (r.key_out && !r.key_out_in_place)
          key_out_ = &sc_.output(static_cast<size_t>(2 * b * layout::kRopeDim), kPoison,
                                 "RoPE part out");
      }
      kv_stride_ = layout::min_page_stride(mla, p) + page_pad;
      cache_ = &sc_.output(pages * kv_stride_, kPoison, "MLA cache");
      if (has_fused_index(kind)) {
        k_stride_ = shape.head_dim + pad;
        k_ = &sc_.input(std::vector<uint8_t>(2 * b * k_stride_));
        index_stride_ = index_min_page_stride() + page_pad;
        index_cache_ = &sc_.output(pages * index_stride_, kPoison, "fused index-K cache");
        if (!shape.shared_slots)
          index_slots_ = &sc_.input(std::vector<uint8_t>(8 * b));
      }
    }
    pages_ = pages;
    slots_ = &sc_.input(std::vector<uint8_t>(8 * b));
    if (shape.slot_type == SlotType::kPageTable) {
      table_.emplace(sc_, b);
      if (index_slots_ != nullptr) index_table_.emplace(sc_, b);
    }
    if (shape.count_on_device) n_ = &sc_.input(std::vector<uint8_t>(4));
    diagnostics_ = &sc_.output(sizeof(Diagnostics), 0, "diagnostics");
  }

  StoreKind kind() const { return kind_; }
  const CaseShape& shape() const { return shape_; }
  int64_t capacity() const { return capacity_; }

  // Fresh inputs: rows < real_rows random (a few with a NaN, +Inf or -Inf among their values),
  // the padding rows NaN garbage.
  void randomize_inputs(std::mt19937_64& rng, int64_t real_rows) {
    const uint16_t specials[3] = {0x7fc0, 0x7f80, 0xff80};
    for (auto [m, stride] : {std::pair{k_, k_stride_}, std::pair{nope_, nope_stride_},
                             std::pair{rope_, rope_stride_}}) {
      if (m == nullptr) continue;
      const int64_t rows = shape_.num_tokens;
      std::vector<uint16_t> v = random_bf16_rows(rng, rows, stride);
      for (int64_t r = 0; r < rows; ++r) {
        if (r >= real_rows) fill_bf16_garbage(v.data() + r * stride, stride, rng);
        else if (r % 13 == 5) v[r * stride + rng() % 64] = specials[rng() % 3];
      }
      m->host = as_bytes(v);
    }
    if (shape_.rotary.on) randomize_rotary(rng, real_rows);
  }
  // The rotation's operands (MlaRotary): positions of the step (step_positions, with faults),
  // Q random, the in-place buffers uploaded (they are outputs).
  void randomize_rotary(std::mt19937_64& rng, int64_t real_rows) {
    const MlaRotary& r = shape_.rotary;
    positions_->host = slots_as_bytes(
        step_positions(rng, shape_.num_tokens, real_rows, r.max_position, true),
        r.positions_type);
    if (q_ != nullptr) {
      q_->host = as_bytes(random_bf16_rows(rng, shape_.num_tokens, r.q_heads * kQHeadDim));
      q_->upload();
    }
    if (r.key_out_in_place) rope_->upload();
  }
  void set_count(int32_t n) {
    if (n_ != nullptr) n_->host = as_bytes(std::vector<int32_t>{n});
  }
  void set_slots(const std::vector<int64_t>& slots) {
    if (table_) return table_->set_slots(slots, shape_.page_size, pages_ * shape_.owner_size);
    slots_->host = slots_as_bytes(slots, shape_.slot_type);
  }
  void set_index_slots(const std::vector<int64_t>& slots) {
    if (index_table_)
      return index_table_->set_slots(slots, shape_.page_size, pages_ * shape_.owner_size);
    if (index_slots_ != nullptr) index_slots_->host = slots_as_bytes(slots, shape_.slot_type);
  }
  void upload_inputs() { sc_.upload_inputs(); }
  // One step's inputs (rows < n real), count and slots (the fused index-K's too).
  void set_step(std::mt19937_64& rng, int64_t n, const std::vector<int64_t>& slots) {
    randomize_inputs(rng, n);
    set_count(static_cast<int32_t>(n));
    set_slots(slots);
    set_index_slots(slots);
  }

  Status run_device(cudaStream_t stream, LaunchOptions launch = {}) {
    return dispatch(Side::kDevice, stream, launch);
  }
  void run_reference() { dispatch(Side::kHost, nullptr, {}); }
  ::testing::AssertionResult outputs_match() const { return sc_.outputs_match(); }
  Mirror& cache() { return *cache_; }
  const uint8_t* k_host() const { return k_->host.data(); }
  // The bf16 inputs with their row strides (elements), for kernels that produce them in place.
  std::vector<std::pair<Mirror*, int64_t>> bf16_inputs() {
    std::vector<std::pair<Mirror*, int64_t>> out;
    for (auto [m, stride] : {std::pair{k_, k_stride_}, std::pair{nope_, nope_stride_},
                             std::pair{rope_, rope_stride_}})
      if (m != nullptr) out.emplace_back(m, stride);
    return out;
  }
  Mirror* slots_mirror() { return slots_; }
  // The rotation's buffers (MlaRotary).
  void set_positions(const std::vector<int64_t>& positions) {
    positions_->host = slots_as_bytes(positions, shape_.rotary.positions_type);
  }
  Mirror& rope_cos_sin() { return *cos_sin_; }
  Mirror& rope_input() { return *rope_; }
  Mirror& rope_out() { return shape_.rotary.key_out_in_place ? *rope_ : *key_out_; }
  Mirror* index_slots_mirror() { return index_slots_; }
  Mirror* count_mirror() { return n_; }
  Mirror* index_cache() { return index_cache_; }
  Diagnostics device_diagnostics() const {
    Diagnostics d{};
    const auto bytes = diagnostics_->download();
    std::memcpy(&d, bytes.data(), sizeof d);
    return d;
  }

 private:
  static void* ptr(Mirror* m, Side side) { return m == nullptr ? nullptr : m->ptr(side); }
  int64_t index_min_page_stride() const {
    return has_fp4_index(kind_)
               ? layout::min_page_stride(IndexKFormat::kFp4, shape_.page_size, shape_.head_dim)
               : layout::min_page_stride(IndexKFormat::kFp8, shape_.page_size, shape_.head_dim);
  }

  Status dispatch(Side side, cudaStream_t stream, LaunchOptions launch) {
    Batch batch{shape_.num_tokens, static_cast<const int32_t*>(ptr(n_, side)),
                static_cast<Diagnostics*>(ptr(diagnostics_, side))};
    const auto mapping = [&](Mirror* data, std::optional<PageTableSource>& table) {
      return table ? table->slots(side, shape_.reserved_slot, shape_.owner_rank,
                                  shape_.owner_size)
                   : SlotMapping{ptr(data, side), shape_.slot_type, shape_.reserved_slot,
                                 shape_.owner_rank, shape_.owner_size};
    };
    const SlotMapping slots = mapping(slots_, table_);
    const ScaleRule index_rule =
        kind_ == StoreKind::kIndexKFp8Pow2 ? ScaleRule::kPow2 : ScaleRule::kAmax;
    IndexKFp8Cache index_cache{nullptr, pages_, shape_.page_size, index_stride_, shape_.head_dim,
                               index_rule};
    const Fp4Ties ties =
        kind_ == StoreKind::kIndexKFp4Even ? Fp4Ties::kToEven : Fp4Ties::kTowardZero;
    IndexKFp4Cache fp4_cache{nullptr, pages_, shape_.page_size, index_stride_, shape_.head_dim,
                             ties};
    // The paged index-K stores (fp8, fp4): the same fields, each with its cache, its host
    // reference and its store.
    const auto paged_index_k = [&](auto p, const auto& cache, auto* reference_store,
                                   auto* device_store) {
      p.batch = batch;
      p.slots = slots;
      p.k = ptr(k_, side);
      p.k_row_stride = k_stride_;
      p.cache = cache;
      p.cache.data = ptr(cache_, side);
      p.launch = launch;
      if (side == Side::kHost) return reference_store(p), Status::kSuccess;
      return device_store(p, stream);
    };
    switch (kind_) {
      case StoreKind::kIndexKBf16: {
        IndexKBf16Params p;
        p.batch = batch;
        p.slots = slots;
        p.k = ptr(k_, side);
        p.k_row_stride = k_stride_;
        p.cache = ptr(cache_, side);
        p.cache_row_stride = cache_stride_;
        p.num_slots = capacity_;
        p.head_dim = shape_.head_dim;
        p.launch = launch;
        if (side == Side::kHost) return reference::store_index_k_bf16(p), Status::kSuccess;
        return store_index_k_bf16(p, stream);
      }
      case StoreKind::kIndexKFp8Amax:
      case StoreKind::kIndexKFp8Pow2:
        return paged_index_k(IndexKFp8Params{}, index_cache, reference::store_index_k_fp8,
                             store_index_k_fp8);
      case StoreKind::kIndexKFp4Even:
      case StoreKind::kIndexKFp4TowardZero:
        return paged_index_k(IndexKFp4Params{}, fp4_cache, reference::store_index_k_fp4,
                             store_index_k_fp4);
      default: {
        FusedStoreParams p;
        p.batch = batch;
        p.kv_slots = slots;
        p.nope = ptr(nope_, side);
        p.nope_row_stride = shape_.mla_row_stride != 0 ? shape_.mla_row_stride : nope_stride_;
        p.rope = ptr(rope_, side);
        p.rope_row_stride = shape_.mla_row_stride != 0 ? shape_.mla_row_stride : rope_stride_;
        p.kv_cache.layout = mla_layout_of(kind_);
        p.kv_cache.data = ptr(cache_, side);
        p.kv_cache.num_pages = pages_;
        p.kv_cache.page_size = shape_.page_size;
        p.kv_cache.page_stride_bytes = kv_stride_;
        p.kv_cache.scale_rule = kind_ == StoreKind::kV32Amax ? ScaleRule::kAmax : ScaleRule::kPow2;
        if (has_fused_index(kind_)) {
          p.index_k = ptr(k_, side);
          p.index_k_row_stride = k_stride_;
          p.index_slots = shape_.shared_slots ? slots : mapping(index_slots_, index_table_);
          if (has_fp4_index(kind_)) {
            p.index_format = IndexKFormat::kFp4;
            p.index_fp4_cache = fp4_cache;
            p.index_fp4_cache.data = ptr(index_cache_, side);
          } else {
            p.index_cache = index_cache;
            p.index_cache.data = ptr(index_cache_, side);
          }
        }
        p.launch = launch;
        if (shape_.rotary.on) p.rotary = rotary(side);
        if (side == Side::kHost) return reference::fused_store_cache(p), Status::kSuccess;
        return fused_store_cache(p, stream);
      }
    }
  }

  RotaryEmbedding rotary(Side side) const {
    const MlaRotary& r = shape_.rotary;
    RotaryEmbedding e;
    e.positions = r.by_row ? nullptr : ptr(positions_, side);
    e.cos_sin_rows = r.by_row ? RopeCosSinRows::kByRow : RopeCosSinRows::kByPosition;
    e.cos_sin_layout = r.interleaved ? RopeCosSinLayout::kInterleaved : RopeCosSinLayout::kHalves;
    e.positions_type = r.positions_type;
    e.cos_sin_cache = ptr(cos_sin_, side);
    e.cos_sin_type = r.cos_sin_type;
    e.max_position = r.max_position;
    e.rotary_dim = layout::kRopeDim;
    e.style = r.style;
    e.rounding = r.rounding;
    e.num_query_heads = r.q_heads;
    if (q_ != nullptr) {
      e.query = static_cast<uint16_t*>(ptr(q_, side)) + kQPeOffset;
      e.query_token_stride = r.q_heads * kQHeadDim;
      e.query_head_stride = kQHeadDim;
      if (r.q_out_of_place) {
        e.query_out = ptr(q_out_, side);
        e.query_out_token_stride = r.q_heads * layout::kRopeDim;
        e.query_out_head_stride = layout::kRopeDim;
      }
    }
    if (r.key_out || r.key_out_in_place) {
      e.key_out = r.key_out_in_place ? ptr(rope_, side) : ptr(key_out_, side);
      e.key_out_token_stride = r.key_out_in_place ? rope_stride_ : layout::kRopeDim;
    }
    return e;
  }

  StoreKind kind_;
  CaseShape shape_;
  Scenario sc_;
  int64_t capacity_ = 0, pages_ = 0;
  int64_t k_stride_ = 0, cache_stride_ = 0, nope_stride_ = 0, rope_stride_ = 0;
  int64_t nope_dim_ = 0, kv_stride_ = 0, index_stride_ = 0;
  Mirror *k_ = nullptr, *nope_ = nullptr, *rope_ = nullptr, *slots_ = nullptr;
  Mirror *index_slots_ = nullptr, *n_ = nullptr, *cache_ = nullptr, *index_cache_ = nullptr;
  Mirror* diagnostics_ = nullptr;
  Mirror *positions_ = nullptr, *cos_sin_ = nullptr, *q_ = nullptr, *q_out_ = nullptr;
  Mirror* key_out_ = nullptr;
  std::optional<PageTableSource> table_, index_table_;
};

// Slots of one step: real rows (< n) get distinct slots, with a few -1, reserved and
// past-capacity ones when `faults`; padding rows get 0, a real row's slot, -1 or noise.
inline std::vector<int64_t> step_slots(std::mt19937_64& rng, int64_t num_tokens, int64_t n,
                                       int64_t capacity, int64_t reserved, bool faults) {
  std::vector<int64_t> slots = distinct_slots(rng, num_tokens, capacity, reserved);
  const int64_t real = std::clamp<int64_t>(n, 0, num_tokens);
  std::uniform_int_distribution<int> pick(0, 15);
  for (int64_t i = 0; i < num_tokens; ++i) {
    const int r = pick(rng);
    if (i < real) {
      if (!faults) continue;
      if (r == 0) slots[i] = -1;
      else if (r == 1 && reserved >= 0) slots[i] = reserved;
      else if (r == 2) slots[i] = capacity + static_cast<int64_t>(rng() % 1000);
    } else {
      const int64_t stale = real > 0 ? slots[rng() % real] : 0;
      const int64_t choices[4] = {0, stale, -1, static_cast<int64_t>(rng() % (2 * capacity))};
      slots[i] = choices[r % 4];
    }
  }
  return slots;
}

}  // namespace cachestore::test
