// KvCase: store_paged_kv with its buffers on both sides (device for the library, host for the
// reference), for the sweeps, the padded-replay graphs, owner sharding and the golden records.
// K and V are sliced out of one qkv-like tensor [num_tokens, width] as engines do.
#pragma once

#include <cmath>
#include <optional>

#include "cachestore/layout.h"
#include "gpu_support.cuh"
#include "page_table_source.cuh"
#include "reference/conversions.h"
#include "reference/reference.h"
#include "rope_operands.h"

namespace cachestore::test {

enum class KvLayout { kNhd, kHnd, kStacked, kMla576, kPagedAttention };

inline const char* kv_layout_name(KvLayout l) {
  switch (l) {
    case KvLayout::kNhd: return "NHD";
    case KvLayout::kHnd: return "HND";
    case KvLayout::kStacked: return "Stacked";
    case KvLayout::kMla576: return "Mla576";
    case KvLayout::kPagedAttention: return "PagedAttention";
  }
  return "?";
}
inline const char* kv_cache_type_name(KvCacheType t) {
  switch (t) {
    case KvCacheType::kAuto: return "auto";
    case KvCacheType::kFp8E4m3: return "e4m3";
    case KvCacheType::kFp8E5m2: return "e5m2";
    case KvCacheType::kNvfp4: return "nvfp4";
    case KvCacheType::kFp8E4m3PerTokenHead: return "e4m3_per_token_head";
  }
  return "?";
}

// RoPE in the store (RotaryEmbedding): off unless `on`.
struct KvRope {
  bool on = false;
  RopeStyle style = RopeStyle::kNeox;
  RopeRounding rounding = RopeRounding::kInputType;
  int32_t rotary_dim = 0;          // 0: the K head dim
  int32_t q_heads = 0;             // 0: no Q
  bool q_out_of_place = false;     // Q into its own (poisoned) buffer, else rotated in place
  bool key_out = false;            // the rotated K into its own (poisoned) buffer
  KvDataType cos_sin_type = KvDataType::kFp32;
  SlotType positions_type = SlotType::kInt64;
  int64_t max_position = 4096;
};

struct KvShape {
  KvLayout layout = KvLayout::kNhd;
  KvCacheType cache_type = KvCacheType::kAuto;
  KvDataType input_type = KvDataType::kBf16;
  int64_t num_tokens = 40;
  int32_t page_size = 16;
  int32_t heads = 8;
  int32_t k_dim = 128;
  int32_t v_dim = 128;             // 0: K only
  bool head_padded = false;        // input head stride D + 8 (heads not packed)
  int32_t head_pad = 0;            // ... or D + head_pad, any number of elements
  int32_t input_offset = 0;        // the input starts this many elements into its buffer
  int32_t scale_stride = 0;        // 0 per tensor, 1 per head
  SlotType slot_type = SlotType::kInt64;  // kPageTable: the slots through a page table
  int64_t reserved_slot = kNoReservedSlot;
  int32_t owner_rank = 0;
  int32_t owner_size = 1;
  int64_t extra_pages = 2;         // local pages beyond what the rows need
  int64_t num_pages = 0;           // > 0: exactly this many local pages
  bool count_on_device = true;     // false: num_tokens_non_padded = nullptr
  KvRope rope;
};

inline int64_t kv_input_bytes(KvDataType type) { return type == KvDataType::kFp32 ? 4 : 2; }

// Random fp32 values: exponents 2^-24 .. 2^24, random signs and mantissas.
inline std::vector<uint8_t> random_f32_values(std::mt19937_64& rng, int64_t count) {
  std::vector<uint32_t> out(static_cast<size_t>(count));
  for (auto& v : out) {
    const uint32_t r = static_cast<uint32_t>(rng());
    v = ((r & 1u) << 31) | ((103u + (r >> 1) % 49u) << 23) | ((r >> 8) & 0x7fffffu);
  }
  return as_bytes(out);
}

// Random 16-bit values of the input type: bf16 rows of varying magnitude, or fp16 patterns
// with exponents 2^-10 .. 2^10 and random signs and mantissas.
inline std::vector<uint16_t> random_kv_values(std::mt19937_64& rng, int64_t rows, int64_t width,
                                              KvDataType type) {
  if (type == KvDataType::kBf16) return random_bf16_rows(rng, rows, width);
  std::vector<uint16_t> out(static_cast<size_t>(rows * width));
  for (auto& v : out) {
    const uint32_t r = static_cast<uint32_t>(rng());
    v = static_cast<uint16_t>(((r & 1u) << 15) | ((5u + (r >> 1) % 21u) << 10) | ((r >> 8) & 0x3ffu));
  }
  return out;
}

class KvCase {
 public:
  explicit KvCase(const KvShape& shape) : s_(shape) {
    const bool mla = s_.layout == KvLayout::kMla576;
    if (mla) {
      s_.heads = 1;
      s_.k_dim = layout::kMlaKvcDim;
      s_.v_dim = layout::kMlaRowDim - layout::kMlaKvcDim;
    }
    const int64_t b = s_.num_tokens;
    const int32_t p = s_.page_size, h = s_.heads;
    pages_ = s_.num_pages > 0 ? s_.num_pages : (b + 24 + p - 1) / p + s_.extra_pages;
    capacity_ = pages_ * p;
    // Input: [K heads | V heads | 8 spare] per token, each head padded by 8 when head_padded.
    const int32_t pad = s_.head_padded ? 8 : s_.head_pad;
    k_head_stride_ = s_.k_dim + pad;
    v_head_stride_ = s_.v_dim + pad;
    width_ = h * k_head_stride_ + h * v_head_stride_ + 8;
    in_bytes_ = kv_input_bytes(s_.input_type);
    input_ = &sc_.input(std::vector<uint8_t>(in_bytes_ * (b * width_ + s_.input_offset)));

    const bool fp8 = s_.cache_type != KvCacheType::kAuto;
    elem_ = fp8 ? 1 : in_bytes_;
    // nvfp4: a byte holds two values (D / 2 bytes an entry); its block scales take the same
    // layout with D / 16 bytes an entry.
    const bool nvfp4 = s_.cache_type == KvCacheType::kNvfp4;
    const int32_t per = nvfp4 ? 2 : 1;
    const int32_t kd = s_.k_dim / per, vd = s_.v_dim / per;
    // fp8_e4m3_per_token_head: its fp32 scale views take the layout with one element an entry.
    const bool token_head = s_.cache_type == KvCacheType::kFp8E4m3PerTokenHead;
    const int32_t kb = token_head ? 1 : s_.k_dim / 16, vb = token_head ? 1 : s_.v_dim / 16;
    switch (s_.layout) {
      case KvLayout::kNhd:
        k_strides_ = layout::kv_nhd_strides(p, h, kd);
        v_strides_ = layout::kv_nhd_strides(p, h, vd);
        k_block_strides_ = layout::kv_nhd_strides(p, h, kb);
        v_block_strides_ = layout::kv_nhd_strides(p, h, vb);
        break;
      case KvLayout::kHnd:
        k_strides_ = layout::kv_hnd_strides(p, h, kd);
        v_strides_ = layout::kv_hnd_strides(p, h, vd);
        k_block_strides_ = layout::kv_hnd_strides(p, h, kb);
        v_block_strides_ = layout::kv_hnd_strides(p, h, vb);
        break;
      case KvLayout::kStacked:  // one buffer; requires Dk == Dv
        k_strides_ = v_strides_ = layout::kv_stacked_nhd_strides(p, h, kd);
        v_offset_ = layout::kv_stacked_v_offset(p, h, kd);
        k_block_strides_ = v_block_strides_ = layout::kv_stacked_nhd_strides(p, h, kb);
        v_block_offset_ = layout::kv_stacked_v_offset(p, h, kb);
        break;
      case KvLayout::kMla576:  // one buffer: V = k_pe at K base + 512
        k_strides_ = v_strides_ = layout::kv_mla_row_strides(p);
        v_offset_ = layout::kMlaKvcDim;
        break;
      case KvLayout::kPagedAttention: {  // vLLM reshape_and_cache: K chunked by x, V d-major
        const int32_t x = layout::kv_paged_attention_x(static_cast<int32_t>(elem_));
        k_strides_ = layout::kv_paged_attention_key_strides(p, h, s_.k_dim, x);
        k_dim_layout_ = layout::kv_paged_attention_key_dim(p, x);
        v_strides_ = layout::kv_paged_attention_value_strides(p, h, s_.v_dim);
        v_dim_layout_ = layout::kv_paged_attention_value_dim(p);
        break;
      }
    }
    const bool shared = s_.layout == KvLayout::kStacked || mla;
    k_cache_ = &sc_.output(elem_ * pages_ * k_strides_.page, kPoison, "K cache");
    if (!shared && s_.v_dim > 0)
      v_cache_ = &sc_.output(elem_ * pages_ * v_strides_.page, kPoison, "V cache");
    if (nvfp4 || token_head) {
      const int64_t bytes = token_head ? 4 : 1;
      k_blocks_ = &sc_.output(bytes * pages_ * k_block_strides_.page, kPoison, "K block scales");
      if (!shared && s_.v_dim > 0)
        v_blocks_ = &sc_.output(bytes * pages_ * v_block_strides_.page, kPoison,
                                "V block scales");
    }
    if (fp8) {
      k_scale_ = &sc_.input(std::vector<uint8_t>(4 * h));
      v_scale_ = &sc_.input(std::vector<uint8_t>(4 * h));
    }
    slots_ = &sc_.input(std::vector<uint8_t>(8 * b));
    if (s_.slot_type == SlotType::kPageTable) table_.emplace(sc_, b);
    if (shape.count_on_device) n_ = &sc_.input(std::vector<uint8_t>(4));
    if (s_.rope.on) {
      KvRope& r = s_.rope;
      if (r.rotary_dim == 0) r.rotary_dim = s_.k_dim;
      positions_ = &sc_.input(std::vector<uint8_t>(8 * b));
      const int64_t cs_bytes = kv_input_bytes(r.cos_sin_type);
      cos_sin_ = &sc_.input(std::vector<uint8_t>(cs_bytes * r.max_position * r.rotary_dim));
      q_stride_ = static_cast<int64_t>(r.q_heads) * s_.k_dim;
      const size_t q_bytes = static_cast<size_t>(in_bytes_ * b * q_stride_);
      if (r.q_heads > 0) {
        if (r.q_out_of_place) {
          q_ = &sc_.input(std::vector<uint8_t>(q_bytes));
          q_out_ = &sc_.output(q_bytes, kPoison, "Q out");
        } else {
          q_ = q_out_ = &sc_.output(q_bytes, 0, "Q (in place)");
        }
      }
      if (r.key_out)
        key_out_ = &sc_.output(static_cast<size_t>(in_bytes_ * b * s_.heads * s_.k_dim), kPoison,
                               "K out");
    }
    diagnostics_ = &sc_.output(sizeof(Diagnostics), 0, "diagnostics");
  }

  const KvShape& shape() const { return s_; }
  int64_t capacity() const { return capacity_; }  // local
  int64_t global_capacity() const { return capacity_ * s_.owner_size; }
  int64_t pages() const { return pages_; }
  int64_t width() const { return width_; }
  const layout::KvStrides& k_strides() const { return k_strides_; }

  // Rows < real_rows random (a few with NaN / Inf values); padding rows NaN garbage.
  void randomize_inputs(std::mt19937_64& rng, int64_t real_rows) {
    if (s_.input_type == KvDataType::kFp32) {
      std::vector<uint8_t> bytes = random_f32_values(rng, s_.num_tokens * width_ + s_.input_offset);
      auto* f = reinterpret_cast<uint32_t*>(bytes.data()) + s_.input_offset;
      const uint32_t specials[3] = {0x7fc00000u, 0x7f800000u, 0xff800000u};
      for (int64_t r = 0; r < s_.num_tokens; ++r) {
        if (r >= real_rows) {
          for (int64_t i = 0; i < width_; ++i) f[r * width_ + i] = 0x7fc00000u | (rng() & 0xffffu);
        } else if (r % 11 == 3) {
          f[r * width_ + rng() % width_] = specials[rng() % 3];
        }
      }
      input_->host = std::move(bytes);
      return;
    }
    std::vector<uint16_t> v = random_kv_values(rng, s_.num_tokens, width_, s_.input_type);
    const uint16_t specials[3] = {0x7fc0, 0x7f80, 0xff80};  // bf16 NaN, +Inf, -Inf
    const uint16_t fp16_specials[3] = {0x7e00, 0x7c00, 0xfc00};
    for (int64_t r = 0; r < s_.num_tokens; ++r) {
      if (r >= real_rows) {
        fill_bf16_garbage(v.data() + r * width_, width_, rng);
      } else if (r % 11 == 3) {
        v[r * width_ + rng() % width_] =
            (s_.input_type == KvDataType::kBf16 ? specials : fp16_specials)[rng() % 3];
      } else if (r % 13 == 5) {  // an all-zero head start (an all-zero nvfp4 block), -0 too
        for (int64_t i = 0; i < 16; ++i) v[r * width_ + i] = i % 5 == 0 ? 0x8000 : 0;
      }
    }
    v.insert(v.begin(), s_.input_offset, 0);
    input_->host = as_bytes(v);
  }
  void set_input(const std::vector<uint16_t>& values) { input_->host = as_bytes(values); }

  // RoPE operands: a cos/sin cache of true angles (pos * 10000^(-2i / rotary_dim)) in its type,
  // Q random like K (uploaded: in place it is an output), and real rows' positions random in
  // the cache with 0, the last one and, when `faults`, one below and one past the cache; padded
  // rows hold garbage positions.
  void randomize_rope(std::mt19937_64& rng, int64_t real_rows, bool faults) {
    if (!s_.rope.on) return;
    const KvRope& r = s_.rope;
    cos_sin_->host = cos_sin_table(r.cos_sin_type, r.max_position, r.rotary_dim);
    const std::vector<int64_t> positions =
        step_positions(rng, s_.num_tokens, real_rows, r.max_position, faults);
    set_positions(positions);
    if (q_ != nullptr) {
      std::vector<uint8_t> q;
      if (s_.input_type == KvDataType::kFp32) {
        q = random_f32_values(rng, s_.num_tokens * q_stride_);
      } else {
        q = as_bytes(random_kv_values(rng, s_.num_tokens, q_stride_, s_.input_type));
      }
      q_->host = std::move(q);
      q_->upload();
    }
  }
  void set_positions(const std::vector<int64_t>& positions) {
    positions_->host = slots_as_bytes(positions, s_.rope.positions_type);
  }
  Mirror* query() { return q_out_; }
  Mirror& rope_cos_sin() { return *cos_sin_; }
  Mirror& rope_positions() { return *positions_; }
  // Scales in [0.004, 0.5) (one per head; per-tensor uses the first); nvfp4's global scales in
  // [2^-14, 2), so that the block scales of the rows' magnitudes (2^-11 .. 2^11) run from e4m3
  // subnormals to saturation.
  void randomize_scales(std::mt19937_64& rng) {
    if (k_scale_ == nullptr) return;
    const bool nvfp4 = s_.cache_type == KvCacheType::kNvfp4;
    std::uniform_real_distribution<float> u(std::log(nvfp4 ? 0x1p-14f : 0.004f),
                                            std::log(nvfp4 ? 2.0f : 0.5f));
    std::vector<float> k(s_.heads), v(s_.heads);
    for (auto& x : k) x = std::exp(u(rng));
    for (auto& x : v) x = std::exp(u(rng));
    set_scales(k, v);
  }
  void set_scales(const std::vector<float>& k, const std::vector<float>& v) {
    if (k_scale_ == nullptr) return;
    k_scale_->host = as_bytes(k);
    v_scale_->host = as_bytes(v);
  }
  std::vector<float> host_scales(bool v) const {
    const Mirror* m = v ? v_scale_ : k_scale_;
    std::vector<float> out(m == nullptr ? 0 : m->host.size() / 4);
    if (m != nullptr) std::memcpy(out.data(), m->host.data(), m->host.size());
    return out;
  }
  void set_count(int32_t n) { n_->host = as_bytes(std::vector<int32_t>{n}); }
  void set_slots(const std::vector<int64_t>& slots) {
    if (table_) return table_->set_slots(slots, s_.page_size, pages_ * s_.owner_size);
    slots_->host = slots_as_bytes(slots, s_.slot_type);
  }
  void upload_inputs() { sc_.upload_inputs(); }

  // What a padded-replay test captures its graph on: every row real, fresh inputs, scales and
  // (with RoPE) positions, distinct slots; uploaded. Returns the slots.
  std::vector<int64_t> prime_every_row(std::mt19937_64& rng) {
    const int64_t b = s_.num_tokens;
    std::vector<int64_t> slots = distinct_slots(rng, b, capacity_, -1);
    randomize_inputs(rng, b);
    randomize_scales(rng);
    randomize_rope(rng, b, false);
    set_count(static_cast<int32_t>(b));
    set_slots(slots);
    upload_inputs();
    return slots;
  }
  // One replay's inputs: n real rows with fresh slots, `padding` in the others (garbage inputs and
  // positions), new scales (read at run time). Returns the slots; replay_matches_reference
  // uploads.
  std::vector<int64_t> prepare_replay(std::mt19937_64& rng, int64_t n, Padding padding,
                                      const std::vector<int64_t>& previous) {
    std::vector<int64_t> slots =
        padded_replay_slots(rng, s_.num_tokens, n, capacity_, padding, previous);
    randomize_inputs(rng, n);
    randomize_scales(rng);
    randomize_rope(rng, n, false);
    set_count(static_cast<int32_t>(n));
    set_slots(slots);
    return slots;
  }

  Status run_device(cudaStream_t stream, LaunchOptions launch = {}) {
    return store_paged_kv(params(Side::kDevice, launch), stream);
  }
  void run_reference() { reference::store_paged_kv(params(Side::kHost, {})); }
  ::testing::AssertionResult outputs_match() const { return sc_.outputs_match(); }
  Mirror& k_cache() { return *k_cache_; }
  Mirror* v_cache() { return v_cache_; }
  Mirror& input() { return *input_; }
  Mirror& slots() { return *slots_; }
  Diagnostics device_diagnostics() const {
    Diagnostics d{};
    const auto bytes = diagnostics_->download();
    std::memcpy(&d, bytes.data(), sizeof d);
    return d;
  }

  PagedKvParams params(Side side, LaunchOptions launch) {
    PagedKvParams p;
    p.batch = {s_.num_tokens, n_ ? static_cast<const int32_t*>(n_->ptr(side)) : nullptr,
               static_cast<Diagnostics*>(diagnostics_->ptr(side))};
    p.slots = table_ ? table_->slots(side, s_.reserved_slot, s_.owner_rank, s_.owner_size)
                     : SlotMapping{slots_->ptr(side), s_.slot_type, s_.reserved_slot,
                                   s_.owner_rank, s_.owner_size};
    p.num_heads = s_.heads;
    p.input_type = s_.input_type;
    p.cache_type = s_.cache_type;
    p.num_pages = pages_;
    p.page_size = s_.page_size;
    auto* in = static_cast<uint8_t*>(input_->ptr(side)) + in_bytes_ * s_.input_offset;
    p.k = {in, width_, k_head_stride_, s_.k_dim};
    auto* k_base = static_cast<uint8_t*>(k_cache_->ptr(side));
    const auto* k_scale = static_cast<const float*>(k_scale_ ? k_scale_->ptr(side) : nullptr);
    const auto* v_scale = static_cast<const float*>(v_scale_ ? v_scale_->ptr(side) : nullptr);
    uint8_t* k_blocks = k_blocks_ ? static_cast<uint8_t*>(k_blocks_->ptr(side)) : nullptr;
    p.k_cache = {k_base, k_strides_.page, k_strides_.entry, k_strides_.head, k_scale,
                 s_.scale_stride, k_dim_layout_.chunk, k_dim_layout_.chunk_stride,
                 k_dim_layout_.dim_stride, k_blocks, k_block_strides_.page,
                 k_block_strides_.entry, k_block_strides_.head};
    if (s_.v_dim > 0) {
      p.v = {in + in_bytes_ * s_.heads * k_head_stride_, width_, v_head_stride_, s_.v_dim};
      uint8_t* v_base = v_cache_ ? static_cast<uint8_t*>(v_cache_->ptr(side))
                                 : k_base + elem_ * v_offset_;
      const int64_t block_bytes = s_.cache_type == KvCacheType::kFp8E4m3PerTokenHead ? 4 : 1;
      uint8_t* v_blocks = v_blocks_ ? static_cast<uint8_t*>(v_blocks_->ptr(side))
                          : k_blocks ? k_blocks + block_bytes * v_block_offset_
                                     : nullptr;
      p.v_cache = {v_base, v_strides_.page, v_strides_.entry, v_strides_.head, v_scale,
                   s_.scale_stride, v_dim_layout_.chunk, v_dim_layout_.chunk_stride,
                   v_dim_layout_.dim_stride, v_blocks, v_block_strides_.page,
                   v_block_strides_.entry, v_block_strides_.head};
    }
    p.launch = launch;
    if (s_.rope.on) {
      const KvRope& r = s_.rope;
      RotaryEmbedding& e = p.rope;
      e.positions = positions_->ptr(side);
      e.positions_type = r.positions_type;
      e.cos_sin_cache = cos_sin_->ptr(side);
      e.cos_sin_type = r.cos_sin_type;
      e.cos_sin_stride = r.rotary_dim;
      e.max_position = r.max_position;
      e.rotary_dim = r.rotary_dim;
      e.style = r.style;
      e.rounding = r.rounding;
      e.num_query_heads = r.q_heads;
      if (q_ != nullptr) {
        e.query = q_->ptr(side);
        e.query_token_stride = q_stride_;
        e.query_head_stride = s_.k_dim;
        if (r.q_out_of_place) {
          e.query_out = q_out_->ptr(side);
          e.query_out_token_stride = q_stride_;
          e.query_out_head_stride = s_.k_dim;
        }
      }
      if (key_out_ != nullptr) {
        e.key_out = key_out_->ptr(side);
        e.key_out_token_stride = static_cast<int64_t>(s_.heads) * s_.k_dim;
        e.key_out_head_stride = s_.k_dim;
      }
    }
    return p;
  }

 private:
  KvShape s_;
  Scenario sc_;
  int64_t pages_ = 0, capacity_ = 0, width_ = 0, elem_ = 2, in_bytes_ = 2, v_offset_ = 0;
  int64_t k_head_stride_ = 0, v_head_stride_ = 0;
  layout::KvStrides k_strides_{}, v_strides_{};
  layout::KvStrides k_block_strides_{}, v_block_strides_{};  // nvfp4's block scales (bytes),
                                                             // per-token-head's (fp32)
  int64_t v_block_offset_ = 0;
  Mirror *k_blocks_ = nullptr, *v_blocks_ = nullptr;
  layout::KvDimLayout k_dim_layout_ = layout::kKvContiguousDim, v_dim_layout_ = layout::kKvContiguousDim;
  Mirror *input_ = nullptr, *k_cache_ = nullptr, *v_cache_ = nullptr;
  Mirror *k_scale_ = nullptr, *v_scale_ = nullptr, *slots_ = nullptr, *n_ = nullptr;
  Mirror* diagnostics_ = nullptr;
  std::optional<PageTableSource> table_;
  Mirror *positions_ = nullptr, *cos_sin_ = nullptr, *q_ = nullptr, *q_out_ = nullptr;
  Mirror* key_out_ = nullptr;
  int64_t q_stride_ = 0;
};

}  // namespace cachestore::test
