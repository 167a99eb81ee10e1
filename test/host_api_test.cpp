// Argument checks of every entry point, run everywhere: each bad argument returns its status
// and a message naming it, before anything is launched (the pointers here are never valid
// device memory; a check that let a call through would fail differently).
#include <functional>
#include <utility>
#include <string>

#include "cachestore/cachestore.h"
#include "cachestore/layout.h"
#include "cachestore/move.h"
#include "test_support.h"
#include "tuning.h"

namespace cachestore::test {
namespace {

void* fake(uintptr_t address) { return reinterpret_cast<void*>(address); }

// A valid-looking call that never reaches a launch in these tests: every case breaks one thing.
IndexKBf16Params bf16_params() {
  IndexKBf16Params p;
  p.batch.num_tokens = 16;
  p.slots = {fake(0x10000), SlotType::kInt64, kNoReservedSlot};
  p.k = fake(0x20000);
  p.k_row_stride = 128;
  p.cache = fake(0x40000);
  p.cache_row_stride = 128;
  p.num_slots = 64;
  return p;
}

IndexKFp8Params fp8_params() {
  IndexKFp8Params p;
  p.batch.num_tokens = 16;
  p.slots = {fake(0x10000), SlotType::kInt32, kNoReservedSlot};
  p.k = fake(0x20000);
  p.k_row_stride = 128;
  p.cache = {fake(0x40000), 4, 64, layout::min_page_stride(IndexKFormat::kFp8, 64, 128), 128,
             ScaleRule::kAmax};
  return p;
}

FusedStoreParams fused_params() {
  FusedStoreParams p;
  p.batch.num_tokens = 16;
  p.kv_slots = {fake(0x10000), SlotType::kInt64, kNoReservedSlot};
  p.nope = fake(0x20000);
  p.nope_row_stride = 576;
  p.rope = fake(0x20000 + 2 * 448);
  p.rope_row_stride = 576;
  p.kv_cache = {MlaLayout::kV4, fake(0x80000), 4, 64, layout::min_page_stride(MlaLayout::kV4, 64),
                ScaleRule::kPow2};
  p.index_k = fake(0x30000);
  p.index_k_row_stride = 128;
  p.index_slots = {fake(0x11000), SlotType::kInt64, kNoReservedSlot};
  p.index_cache = {fake(0x40000), 4, 64, layout::min_page_stride(IndexKFormat::kFp8, 64, 128), 128,
                   ScaleRule::kAmax};
  return p;
}

PagedKvParams kv_params() {
  PagedKvParams p;
  p.batch.num_tokens = 16;
  p.slots = {fake(0x10000), SlotType::kInt64, kNoReservedSlot};
  p.num_heads = 8;
  p.cache_type = KvCacheType::kFp8E4m3;
  p.num_pages = 4;
  p.page_size = 16;
  p.k = {fake(0x20000), 2048, 128, 128};
  p.v = {fake(0x20000 + 2048), 2048, 128, 128};
  const layout::KvStrides nhd = layout::kv_nhd_strides(16, 8, 128);
  p.k_cache = {fake(0x100000), nhd.page, nhd.entry, nhd.head, static_cast<const float*>(fake(0x9000)), 0};
  p.v_cache = {fake(0x200000), nhd.page, nhd.entry, nhd.head, static_cast<const float*>(fake(0x9100)), 1};
  return p;
}

// A page table of valid-looking (never dereferenced) pointers.
SlotMapping page_table_slots() {
  SlotMapping m{fake(0x10000), SlotType::kPageTable, kNoReservedSlot};
  m.page_table = {static_cast<const int32_t*>(fake(0x12000)),
                  static_cast<const int32_t*>(fake(0x13000)),
                  static_cast<const int32_t*>(fake(0x14000)), 4};
  return m;
}

struct Case {
  std::string what;
  Status status;
  std::string names;  // must appear in last_error_message()
};

template <typename Params>
void expect_rejected(Status (*store)(const Params&, cudaStream_t), Params (*base)(),
                     const std::vector<std::pair<Case, std::function<void(Params&)>>>& cases) {
  for (const auto& [c, mutate] : cases) {
    Params p = base();
    mutate(p);
    EXPECT_EQ(store(p, nullptr), c.status) << c.what << ": " << last_error_message();
    const std::string message = last_error_message();
    EXPECT_NE(message.find(c.names), std::string::npos)
        << c.what << ": message \"" << message << "\" does not name " << c.names;
    // check() is the store's own refusal, without the store.
    EXPECT_EQ(check(p), c.status) << c.what << ": check() " << last_error_message();
    EXPECT_EQ(message, last_error_message()) << c.what;
  }
  // The unbroken params pass the check (the stores then fail later, at the device).
  EXPECT_EQ(check(base()), Status::kSuccess) << last_error_message();
  EXPECT_STREQ(last_error_message(), "");
}

using S = Status;

TEST(ArgumentChecks, StoreIndexKBf16) {
  expect_rejected<IndexKBf16Params>(store_index_k_bf16, bf16_params, {
    {{"negative num_tokens", S::kErrorInvalidArgument, "batch.num_tokens"}, [](auto& p) { p.batch.num_tokens = -1; }},
    {{"null slots", S::kErrorInvalidArgument, "slots.data"}, [](auto& p) { p.slots.data = nullptr; }},
    {{"bad slot type", S::kErrorInvalidArgument, "slots.type"}, [](auto& p) { p.slots.type = static_cast<SlotType>(7); }},
    {{"misaligned int64 slots", S::kErrorMisalignedOperand, "slots.data"}, [](auto& p) { p.slots.data = fake(0x10004); }},
    {{"reserved slot -2", S::kErrorInvalidArgument, "slots.reserved_slot"}, [](auto& p) { p.slots.reserved_slot = -2; }},
    {{"misaligned count", S::kErrorMisalignedOperand, "batch.num_tokens_non_padded"}, [](auto& p) { p.batch.num_tokens_non_padded = static_cast<const int32_t*>(fake(0x50002)); }},
    {{"misaligned diagnostics", S::kErrorMisalignedOperand, "batch.diagnostics"}, [](auto& p) { p.batch.diagnostics = static_cast<Diagnostics*>(fake(0x50004)); }},
    {{"head_dim 12", S::kErrorNotSupported, "head_dim"}, [](auto& p) { p.head_dim = 12; }},
    {{"head_dim 0", S::kErrorNotSupported, "head_dim"}, [](auto& p) { p.head_dim = 0; }},
    {{"null k", S::kErrorInvalidArgument, "k"}, [](auto& p) { p.k = nullptr; }},
    {{"k stride below D", S::kErrorInvalidArgument, "k_row_stride"}, [](auto& p) { p.k_row_stride = 64; }},
    {{"k misaligned", S::kErrorMisalignedOperand, "k"}, [](auto& p) { p.k = fake(0x20002); }},
    {{"k stride odd", S::kErrorMisalignedOperand, "k_row_stride"}, [](auto& p) { p.k_row_stride = 130; }},
    {{"null cache", S::kErrorInvalidArgument, "cache"}, [](auto& p) { p.cache = nullptr; }},
    {{"cache misaligned", S::kErrorMisalignedOperand, "cache"}, [](auto& p) { p.cache = fake(0x40008); }},
    {{"cache stride below D", S::kErrorInvalidArgument, "cache_row_stride"}, [](auto& p) { p.cache_row_stride = 8; }},
    {{"negative num_slots", S::kErrorInvalidArgument, "num_slots"}, [](auto& p) { p.num_slots = -4; }},
    {{"capacity overflow", S::kErrorCapacityOverflow, "cache"}, [](auto& p) { p.num_slots = int64_t{1} << 60; }},
    {{"page table on a flat cache", S::kErrorNotSupported, "slots.type"}, [](auto& p) { p.slots = page_table_slots(); }},
  });
}

TEST(ArgumentChecks, StoreIndexKFp8) {
  expect_rejected<IndexKFp8Params>(store_index_k_fp8, fp8_params, {
    {{"null slots", S::kErrorInvalidArgument, "slots.data"}, [](auto& p) { p.slots.data = nullptr; }},
    {{"misaligned int32 slots", S::kErrorMisalignedOperand, "slots.data"}, [](auto& p) { p.slots.data = fake(0x10002); }},
    {{"head_dim 64", S::kErrorNotSupported, "cache.head_dim"}, [](auto& p) { p.cache.head_dim = 64; }},
    {{"head_dim 640", S::kErrorNotSupported, "cache.head_dim"}, [](auto& p) { p.cache.head_dim = 640; }},
    {{"page size 48", S::kErrorNotSupported, "cache.page_size"}, [](auto& p) { p.cache.page_size = 48; }},
    {{"page size 2048", S::kErrorNotSupported, "cache.page_size"}, [](auto& p) { p.cache.page_size = 2048; }},
    {{"page size 0", S::kErrorNotSupported, "cache.page_size"}, [](auto& p) { p.cache.page_size = 0; }},
    {{"page stride too small", S::kErrorInvalidArgument, "cache.page_stride_bytes"}, [](auto& p) { p.cache.page_stride_bytes -= 16; }},
    {{"page stride unaligned", S::kErrorMisalignedOperand, "cache.page_stride_bytes"}, [](auto& p) { p.cache.page_stride_bytes += 2; }},
    {{"cache misaligned", S::kErrorMisalignedOperand, "cache.data"}, [](auto& p) { p.cache.data = fake(0x40004); }},
    {{"null cache", S::kErrorInvalidArgument, "cache.data"}, [](auto& p) { p.cache.data = nullptr; }},
    {{"negative pages", S::kErrorInvalidArgument, "cache.num_pages"}, [](auto& p) { p.cache.num_pages = -1; }},
    {{"pages overflow", S::kErrorCapacityOverflow, "cache.num_pages"}, [](auto& p) { p.cache.num_pages = int64_t{1} << 55; }},
    {{"bad rule", S::kErrorInvalidArgument, "cache.scale_rule"}, [](auto& p) { p.cache.scale_rule = static_cast<ScaleRule>(9); }},
    {{"k misaligned", S::kErrorMisalignedOperand, "k"}, [](auto& p) { p.k = fake(0x20008); }},
    {{"k stride below D", S::kErrorInvalidArgument, "k_row_stride"}, [](auto& p) { p.k_row_stride = 120; }},
    {{"page table: null batch indices", S::kErrorInvalidArgument, "slots.data"}, [](auto& p) { p.slots = page_table_slots(); p.slots.data = nullptr; }},
    {{"page table: null positions", S::kErrorInvalidArgument, "slots.page_table.positions"}, [](auto& p) { p.slots = page_table_slots(); p.slots.page_table.positions = nullptr; }},
    {{"page table: misaligned indptr", S::kErrorMisalignedOperand, "slots.page_table.indptr"}, [](auto& p) { p.slots = page_table_slots(); p.slots.page_table.indptr = static_cast<const int32_t*>(fake(0x13002)); }},
    {{"page table: null indices", S::kErrorInvalidArgument, "slots.page_table.indices"}, [](auto& p) { p.slots = page_table_slots(); p.slots.page_table.indices = nullptr; }},
    {{"page table: negative batch", S::kErrorInvalidArgument, "slots.page_table.batch_size"}, [](auto& p) { p.slots = page_table_slots(); p.slots.page_table.batch_size = -1; }},
  });
}

TEST(ArgumentChecks, StorePagedKv) {
  expect_rejected<PagedKvParams>(store_paged_kv, kv_params, {
    {{"null slots", S::kErrorInvalidArgument, "slots.data"}, [](auto& p) { p.slots.data = nullptr; }},
    {{"page table: null indices", S::kErrorInvalidArgument, "slots.page_table.indices"}, [](auto& p) { p.slots = page_table_slots(); p.slots.page_table.indices = nullptr; }},
    {{"heads 0", S::kErrorNotSupported, "num_heads"}, [](auto& p) { p.num_heads = 0; }},
    {{"heads 257", S::kErrorNotSupported, "num_heads"}, [](auto& p) { p.num_heads = 257; }},
    {{"page size 0", S::kErrorNotSupported, "page_size"}, [](auto& p) { p.page_size = 0; }},
    {{"negative pages", S::kErrorInvalidArgument, "num_pages"}, [](auto& p) { p.num_pages = -1; }},
    {{"bad cache type", S::kErrorInvalidArgument, "cache_type"}, [](auto& p) { p.cache_type = static_cast<KvCacheType>(7); }},
    {{"bad input type", S::kErrorInvalidArgument, "input_type"}, [](auto& p) { p.input_type = static_cast<KvDataType>(7); }},
    {{"head_dim 0", S::kErrorNotSupported, "k.head_dim"}, [](auto& p) { p.k.head_dim = 0; }},
    {{"head_dim 1032", S::kErrorNotSupported, "v.head_dim"}, [](auto& p) { p.cache_type = KvCacheType::kAuto; p.v.head_dim = 1032; }},
    {{"head_dim -3", S::kErrorNotSupported, "k.head_dim"}, [](auto& p) { p.cache_type = KvCacheType::kAuto; p.k.head_dim = -3; }},
    {{"null k", S::kErrorInvalidArgument, "k.data"}, [](auto& p) { p.k.data = nullptr; }},
    {{"k misaligned", S::kErrorMisalignedOperand, "k.data"}, [](auto& p) { p.k.data = fake(0x20001); }},
    {{"fp32 k misaligned", S::kErrorMisalignedOperand, "k.data"}, [](auto& p) { p.input_type = KvDataType::kFp32; p.k.data = fake(0x20002); }},
    {{"null k cache", S::kErrorInvalidArgument, "k_cache.data"}, [](auto& p) { p.k_cache.data = nullptr; }},
    {{"k cache misaligned", S::kErrorMisalignedOperand, "k_cache.data"}, [](auto& p) { p.cache_type = KvCacheType::kAuto; p.k_cache.data = fake(0x100001); }},
    {{"fp32 cache misaligned", S::kErrorMisalignedOperand, "v_cache.data"}, [](auto& p) { p.cache_type = KvCacheType::kAuto; p.input_type = KvDataType::kFp32; p.v_cache.data = fake(0x200002); }},
    {{"chunk 3", S::kErrorInvalidArgument, "k_cache.chunk"}, [](auto& p) { p.k_cache.chunk = 3; }},
    {{"chunk past the head dim", S::kErrorInvalidArgument, "v_cache.chunk"}, [](auto& p) { p.v_cache.chunk = 256; }},
    {{"dim stride 0", S::kErrorInvalidArgument, "k_cache"}, [](auto& p) { p.k_cache.dim_stride = 0; }},
    {{"chunks overlap", S::kErrorInvalidArgument, "k_cache"}, [](auto& p) { p.k_cache.chunk = 16; p.k_cache.chunk_stride = 8; }},
    {{"strided d overlaps entries", S::kErrorInvalidArgument, "v_cache"}, [](auto& p) { p.v_cache.dim_stride = 2; }},
    {{"entries overlap", S::kErrorInvalidArgument, "k_cache"}, [](auto& p) { p.k_cache.entry_stride = 512; }},
    {{"heads overlap", S::kErrorInvalidArgument, "v_cache"}, [](auto& p) { p.v_cache.head_stride = 64; }},
    {{"pages overlap", S::kErrorInvalidArgument, "k_cache"}, [](auto& p) { p.k_cache.page_stride = 8 * 1024; }},
    {{"negative stride", S::kErrorInvalidArgument, "k_cache"}, [](auto& p) { p.k_cache.head_stride = -128; }},
    {{"null scale", S::kErrorInvalidArgument, "k_cache.scale"}, [](auto& p) { p.k_cache.scale = nullptr; }},
    {{"scale stride 2", S::kErrorInvalidArgument, "v_cache.scale_stride"}, [](auto& p) { p.v_cache.scale_stride = 2; }},
    {{"owner size 3", S::kErrorInvalidArgument, "slots.owner_size"}, [](auto& p) { p.slots.owner_size = 3; }},
    {{"owner rank 2 of 2", S::kErrorInvalidArgument, "slots.owner_rank"}, [](auto& p) { p.slots.owner_size = 2; p.slots.owner_rank = 2; }},
    {{"non-pow2 page over 2^32 slots", S::kErrorNotSupported, "page_size"}, [](auto& p) { p.cache_type = KvCacheType::kAuto; p.page_size = 6; p.num_pages = int64_t{1} << 30; p.k_cache.page_stride = p.v_cache.page_stride = 6 * 1024; }},
  });
  // vLLM's paged-attention layout (K chunked by 16 bytes, V d-major), any head dim and
  // element-aligned strides pass.
  {
    PagedKvParams q = kv_params();
    const int32_t x = layout::kv_paged_attention_x(1);
    const layout::KvStrides ks = layout::kv_paged_attention_key_strides(16, 8, 128, x);
    const layout::KvDimLayout kd = layout::kv_paged_attention_key_dim(16, x);
    const layout::KvStrides vs = layout::kv_paged_attention_value_strides(16, 8, 128);
    const layout::KvDimLayout vd = layout::kv_paged_attention_value_dim(16);
    q.k_cache = {fake(0x100000), ks.page, ks.entry, ks.head, static_cast<const float*>(fake(0x9000)), 0,
                 kd.chunk, kd.chunk_stride, kd.dim_stride};
    q.v_cache = {fake(0x200000), vs.page, vs.entry, vs.head, static_cast<const float*>(fake(0x9100)), 1,
                 vd.chunk, vd.chunk_stride, vd.dim_stride};
    EXPECT_EQ(check(q), Status::kSuccess) << last_error_message();
    PagedKvParams odd = kv_params();
    odd.cache_type = KvCacheType::kAuto;
    odd.input_type = KvDataType::kFp32;
    odd.k = {fake(0x20004), 2047, 101, 98};
    odd.v = {fake(0x20004 + 4 * 1000), 2047, 101, 98};
    EXPECT_EQ(check(odd), Status::kSuccess) << last_error_message();
  }
  // A K-only cache ignores v and v_cache; an auto cache ignores the scales.
  PagedKvParams p = kv_params();
  p.v.data = nullptr;
  p.v_cache = {};
  p.cache_type = KvCacheType::kAuto;
  p.k_cache.scale = nullptr;
  p.batch.num_tokens = 0;  // nothing to launch: the checks pass, nothing runs
  const Status s = store_paged_kv(p, nullptr);
  EXPECT_TRUE(s == Status::kSuccess || s == Status::kErrorCudaRuntime || s == Status::kErrorArchMismatch)
      << last_error_message();
}

// RoPE in the store: Llama's GQA (32 Q heads over 8) with a valid-looking rotation.
PagedKvParams rope_params() {
  PagedKvParams p = kv_params();
  RotaryEmbedding& r = p.rope;
  r.positions = fake(0x30000);
  r.cos_sin_cache = fake(0x40000);
  r.max_position = 4096;
  r.rotary_dim = 128;
  r.num_query_heads = 32;
  r.query = fake(0x50000);
  r.query_token_stride = 32 * 128;
  r.query_head_stride = 128;
  return p;
}

// The same params as NHD nvfp4 caches (D / 2 code bytes and D / 16 scale bytes an entry).
void as_nvfp4(PagedKvParams& p) {
  p.cache_type = KvCacheType::kNvfp4;
  const layout::KvStrides codes = layout::kv_nhd_strides(16, 8, 64);
  const layout::KvStrides blocks = layout::kv_nhd_strides(16, 8, 8);
  for (KvCacheView* c : {&p.k_cache, &p.v_cache}) {
    c->page_stride = codes.page;
    c->entry_stride = codes.entry;
    c->head_stride = codes.head;
    c->block_scales = fake(c == &p.k_cache ? 0x300000 : 0x400000);
    c->block_scale_page_stride = blocks.page;
    c->block_scale_entry_stride = blocks.entry;
    c->block_scale_head_stride = blocks.head;
  }
}

// The same params as NHD fp8_e4m3_per_token_head caches (an fp32 scale view [pages, P, H]).
void as_token_head(PagedKvParams& p) {
  p.cache_type = KvCacheType::kFp8E4m3PerTokenHead;
  const layout::KvStrides scales = layout::kv_nhd_strides(16, 8, 1);
  for (KvCacheView* c : {&p.k_cache, &p.v_cache}) {
    c->scale = nullptr;  // not read
    c->block_scales = fake(c == &p.k_cache ? 0x300000 : 0x400000);
    c->block_scale_page_stride = scales.page;
    c->block_scale_entry_stride = scales.entry;
    c->block_scale_head_stride = scales.head;
  }
}
PagedKvParams token_head_params() {
  PagedKvParams p = kv_params();
  as_token_head(p);
  return p;
}

TEST(ArgumentChecks, StorePagedKvPerTokenHead) {
  EXPECT_EQ(check(token_head_params()), Status::kSuccess) << last_error_message();
  {
    PagedKvParams d8 = token_head_params();  // D = 8: one lane a head
    d8.k.head_dim = d8.v.head_dim = 8;
    EXPECT_EQ(check(d8), Status::kSuccess) << last_error_message();
  }
  expect_rejected<PagedKvParams>(store_paged_kv, token_head_params, {
    {{"head dim 96", S::kErrorNotSupported, "power of two in [8, 256]"}, [](auto& p) { p.k.head_dim = 96; }},
    {{"head dim 512", S::kErrorNotSupported, "v.head_dim = 512"}, [](auto& p) { p.v.head_dim = 512; p.v_cache.head_stride = 512; p.v_cache.entry_stride = 4096; p.v_cache.page_stride = 65536; }},
    {{"head dim 4", S::kErrorNotSupported, "k.head_dim = 4"}, [](auto& p) { p.k.head_dim = 4; }},
    {{"V heads off K's groups", S::kErrorNotSupported, "num_heads * k.head_dim"}, [](auto& p) {
      p.num_heads = 1; p.k.head_dim = 8; p.v.head_dim = 256; p.v_cache.head_stride = 256;
      p.v_cache.entry_stride = 256; p.v_cache.page_stride = 4096; p.v_cache.block_scale_page_stride = 16;
      p.v_cache.block_scale_entry_stride = 1; p.k_cache.block_scale_page_stride = 16;
      p.k_cache.block_scale_entry_stride = 1; }},
    {{"null scale view", S::kErrorInvalidArgument, "v_cache.block_scales is null"}, [](auto& p) { p.v_cache.block_scales = nullptr; }},
    {{"scale view misaligned", S::kErrorMisalignedOperand, "k_cache.block_scales must be 4-byte"}, [](auto& p) { p.k_cache.block_scales = fake(0x300002); }},
    {{"scale views overlap", S::kErrorInvalidArgument, "k_cache.block_scales"}, [](auto& p) { p.k_cache.block_scale_entry_stride = 4; }},
    {{"negative scale stride", S::kErrorInvalidArgument, "block-scale strides"}, [](auto& p) { p.v_cache.block_scale_head_stride = -1; }},
    {{"input misaligned for 16 bytes", S::kErrorMisalignedOperand, "16-byte vectors"}, [](auto& p) { p.k.token_stride = 2052; }},
    {{"strided d", S::kErrorNotSupported, "d contiguous"}, [](auto& p) { p.k_cache.dim_stride = 2; }},
    {{"RoPE", S::kErrorNotSupported, "takes no RoPE"}, [](auto& p) {
      p.rope.positions = fake(0x30000); p.rope.cos_sin_cache = fake(0x40000);
      p.rope.max_position = 4096; p.rope.rotary_dim = 128; }},
  });
}

TEST(ArgumentChecks, StorePagedKvWithRope) {
  {
    PagedKvParams nv = rope_params();
    as_nvfp4(nv);
    EXPECT_EQ(check(nv), Status::kSuccess) << last_error_message();
  }
  EXPECT_EQ(check(rope_params()), Status::kSuccess) << last_error_message();
  expect_rejected<PagedKvParams>(store_paged_kv, rope_params, {
    {{"positions type", S::kErrorInvalidArgument, "rope.positions_type"}, [](auto& p) { p.rope.positions_type = SlotType::kPageTable; }},
    {{"positions misaligned", S::kErrorMisalignedOperand, "rope.positions"}, [](auto& p) { p.rope.positions = fake(0x30004); }},
    {{"style", S::kErrorInvalidArgument, "rope.style"}, [](auto& p) { p.rope.style = static_cast<RopeStyle>(2); }},
    {{"rounding", S::kErrorInvalidArgument, "rope.rounding"}, [](auto& p) { p.rope.rounding = static_cast<RopeRounding>(5); }},
    {{"rotary dim 0", S::kErrorNotSupported, "rope.rotary_dim"}, [](auto& p) { p.rope.rotary_dim = 0; }},
    {{"rotary dim past D", S::kErrorNotSupported, "rope.rotary_dim"}, [](auto& p) { p.rope.rotary_dim = 144; }},
    {{"NeoX rotary dim 24", S::kErrorNotSupported, "multiple of 16"}, [](auto& p) { p.rope.rotary_dim = 24; }},
    {{"nvfp4 NeoX rotary dim 48", S::kErrorNotSupported, "multiple of 32"}, [](auto& p) { as_nvfp4(p); p.rope.rotary_dim = 48; }},
    {{"nvfp4 GPT-J rotary dim 8", S::kErrorNotSupported, "multiple of 16"}, [](auto& p) { as_nvfp4(p); p.rope.style = RopeStyle::kGptj; p.rope.rotary_dim = 8; }},
    {{"null cos/sin", S::kErrorInvalidArgument, "rope.cos_sin_cache"}, [](auto& p) { p.rope.cos_sin_cache = nullptr; }},
    {{"cos/sin type", S::kErrorInvalidArgument, "rope.cos_sin_type"}, [](auto& p) { p.rope.cos_sin_type = static_cast<KvDataType>(9); }},
    {{"max position 0", S::kErrorInvalidArgument, "rope.max_position"}, [](auto& p) { p.rope.max_position = 0; }},
    {{"cos/sin stride short", S::kErrorInvalidArgument, "rope.cos_sin_stride"}, [](auto& p) { p.rope.cos_sin_stride = 64; }},
    {{"cos/sin misaligned", S::kErrorMisalignedOperand, "rope.cos_sin_cache"}, [](auto& p) { p.rope.cos_sin_cache = fake(0x40008); }},
    {{"cos/sin row stride", S::kErrorMisalignedOperand, "rope.cos_sin_cache"}, [](auto& p) { p.rope.cos_sin_stride = 130; }},
    {{"head dim 100", S::kErrorNotSupported, "k.head_dim"}, [](auto& p) { p.k.head_dim = p.v.head_dim = 100; p.rope.rotary_dim = 96; p.k_cache.head_stride = p.v_cache.head_stride = 100; }},
    {{"paged-attention cache", S::kErrorNotSupported, "k_cache"}, [](auto& p) {
      const int32_t x = layout::kv_paged_attention_x(1);
      const layout::KvStrides ks = layout::kv_paged_attention_key_strides(16, 8, 128, x);
      const layout::KvDimLayout kd = layout::kv_paged_attention_key_dim(16, x);
      p.k_cache = {fake(0x100000), ks.page, ks.entry, ks.head, static_cast<const float*>(fake(0x9000)), 0,
                   kd.chunk, kd.chunk_stride, kd.dim_stride}; }},
    {{"k stride misaligned", S::kErrorMisalignedOperand, "k:"}, [](auto& p) { p.k.token_stride = 2052; p.v.token_stride = 2052; }},
    {{"q heads", S::kErrorNotSupported, "rope.num_query_heads"}, [](auto& p) { p.rope.num_query_heads = 5000; }},
    {{"null query", S::kErrorInvalidArgument, "rope.query"}, [](auto& p) { p.rope.query = nullptr; }},
    {{"query misaligned", S::kErrorMisalignedOperand, "rope.query"}, [](auto& p) { p.rope.query = fake(0x50008); }},
    {{"query_out stride", S::kErrorMisalignedOperand, "rope.query_out"}, [](auto& p) { p.rope.query_out = fake(0x60000); p.rope.query_out_token_stride = 4100; p.rope.query_out_head_stride = 128; }},
    {{"in place with other strides", S::kErrorInvalidArgument, "in place"}, [](auto& p) { p.rope.query_out = p.rope.query; }},
    {{"key_out misaligned", S::kErrorMisalignedOperand, "rope.key_out"}, [](auto& p) { p.rope.key_out = fake(0x70002); }},
    {{"key_out in place, other strides", S::kErrorInvalidArgument, "rope.key_out == the rotated input"}, [](auto& p) { p.rope.key_out = const_cast<void*>(p.k.data); p.rope.key_out_token_stride = 1024; p.rope.key_out_head_stride = 128; }},
  });
  // GPT-J needs a multiple of 8 (of 16 on nvfp4), K-only caches and no Q pass; positions null is
  // no rotation at all, whatever else the struct holds.
  PagedKvParams p = rope_params();
  p.rope.style = RopeStyle::kGptj;
  p.rope.rotary_dim = 24;
  p.rope.num_query_heads = 0;
  p.v.data = nullptr;
  EXPECT_EQ(check(p), Status::kSuccess) << last_error_message();
  p.rope.positions = nullptr;
  p.rope.rotary_dim = 3;
  EXPECT_EQ(check(p), Status::kSuccess) << last_error_message();
  // A cos/sin row a row is fused_store_cache's: refused here, positions or not.
  PagedKvParams by_row = rope_params();
  by_row.rope.cos_sin_rows = RopeCosSinRows::kByRow;
  EXPECT_EQ(check(by_row), Status::kErrorNotSupported);
  EXPECT_NE(std::string(last_error_message()).find("rope.cos_sin_rows"), std::string::npos);
  by_row.rope.positions = nullptr;
  EXPECT_EQ(check(by_row), Status::kErrorNotSupported);
  // So is a cos/sin row of (cos, sin) pairs.
  PagedKvParams interleaved = rope_params();
  interleaved.rope.cos_sin_layout = RopeCosSinLayout::kInterleaved;
  EXPECT_EQ(check(interleaved), Status::kErrorNotSupported);
  EXPECT_NE(std::string(last_error_message()).find("rope.cos_sin_layout"), std::string::npos);
  interleaved.rope.cos_sin_layout = static_cast<RopeCosSinLayout>(2);
  EXPECT_EQ(check(interleaved), Status::kErrorInvalidArgument);
  EXPECT_NE(std::string(last_error_message()).find("rope.cos_sin_layout"), std::string::npos);
}

TEST(ArgumentChecks, OwnerShardingOnPagedStores) {
  expect_rejected<IndexKFp8Params>(store_index_k_fp8, fp8_params, {
    {{"owner size 0", S::kErrorInvalidArgument, "slots.owner_size"}, [](auto& p) { p.slots.owner_size = 0; }},
    {{"owner rank -1", S::kErrorInvalidArgument, "slots.owner_rank"}, [](auto& p) { p.slots.owner_size = 4; p.slots.owner_rank = -1; }},
  });
  expect_rejected<FusedStoreParams>(fused_store_cache, fused_params, {
    {{"kv owner size 6", S::kErrorInvalidArgument, "kv_slots.owner_size"}, [](auto& p) { p.kv_slots.owner_size = 6; }},
    {{"index owner rank 4 of 4", S::kErrorInvalidArgument, "index_slots.owner_rank"}, [](auto& p) { p.index_slots.owner_size = 4; p.index_slots.owner_rank = 4; }},
  });
}

TEST(ArgumentChecks, FusedStoreCache) {
  expect_rejected<FusedStoreParams>(fused_store_cache, fused_params, {
    {{"null kv slots", S::kErrorInvalidArgument, "kv_slots.data"}, [](auto& p) { p.kv_slots.data = nullptr; }},
    {{"page table for the index only", S::kErrorNotSupported, "index_slots.type"}, [](auto& p) { p.index_slots = page_table_slots(); }},
    {{"page table: null kv positions", S::kErrorInvalidArgument, "kv_slots.page_table.positions"}, [](auto& p) { p.kv_slots = p.index_slots = page_table_slots(); p.kv_slots.page_table.positions = nullptr; }},
    {{"bad layout", S::kErrorInvalidArgument, "kv_cache.layout"}, [](auto& p) { p.kv_cache.layout = static_cast<MlaLayout>(5); }},
    {{"V4 with amax", S::kErrorNotSupported, "kv_cache.scale_rule"}, [](auto& p) { p.kv_cache.scale_rule = ScaleRule::kAmax; }},
    {{"V4 stride too small", S::kErrorInvalidArgument, "kv_cache.page_stride_bytes"}, [](auto& p) { p.kv_cache.page_stride_bytes = 584 * 64; }},
    {{"V3.2 stride too small", S::kErrorInvalidArgument, "kv_cache.page_stride_bytes"}, [](auto& p) { p.kv_cache.layout = MlaLayout::kV32; }},
    {{"V4 stride not 16-byte", S::kErrorMisalignedOperand, "kv_cache.page_stride_bytes"}, [](auto& p) { p.kv_cache.page_stride_bytes += 4; }},
    {{"kv page size 3", S::kErrorNotSupported, "kv_cache.page_size"}, [](auto& p) { p.kv_cache.page_size = 3; }},
    {{"null kv cache", S::kErrorInvalidArgument, "kv_cache.data"}, [](auto& p) { p.kv_cache.data = nullptr; }},
    {{"null nope", S::kErrorInvalidArgument, "nope"}, [](auto& p) { p.nope = nullptr; }},
    {{"nope stride below 448", S::kErrorInvalidArgument, "nope_row_stride"}, [](auto& p) { p.nope_row_stride = 440; }},
    {{"V3.2 nope stride below 512", S::kErrorInvalidArgument, "nope_row_stride"}, [](auto& p) { p.kv_cache.layout = MlaLayout::kV32; p.kv_cache.page_stride_bytes = 656 * 64; p.nope_row_stride = 504; }},
    {{"rope misaligned", S::kErrorMisalignedOperand, "rope"}, [](auto& p) { p.rope = fake(0x20000 + 2 * 447); }},
    {{"rope stride odd", S::kErrorMisalignedOperand, "rope_row_stride"}, [](auto& p) { p.rope_row_stride = 577; }},
    {{"nope stride past 32 bits", S::kErrorNotSupported, "nope_row_stride"}, [](auto& p) { p.nope_row_stride = int64_t{1} << 31; }},
    {{"rope stride past 32 bits", S::kErrorNotSupported, "rope_row_stride"}, [](auto& p) { p.rope_row_stride = int64_t{1} << 31; }},
    {{"null index slots", S::kErrorInvalidArgument, "index_slots.data"}, [](auto& p) { p.index_slots.data = nullptr; }},
    {{"index slot type differs", S::kErrorNotSupported, "index_slots.type"}, [](auto& p) { p.index_slots.type = SlotType::kInt32; }},
    {{"index head_dim 100", S::kErrorNotSupported, "index_cache.head_dim"}, [](auto& p) { p.index_cache.head_dim = 100; }},
    {{"null index cache", S::kErrorInvalidArgument, "index_cache.data"}, [](auto& p) { p.index_cache.data = nullptr; }},
    {{"index k misaligned", S::kErrorMisalignedOperand, "index_k"}, [](auto& p) { p.index_k = fake(0x30004); }},
  });
}

// fused_store_cache with the rows' RoPE part rotated: DeepSeek's 128 Q heads of 64, GPT-J.
FusedStoreParams fused_rotary_params() {
  FusedStoreParams p = fused_params();
  RotaryEmbedding& r = p.rotary;
  r.positions = fake(0x50000);
  r.positions_type = SlotType::kInt64;
  r.cos_sin_cache = fake(0x60000);
  r.cos_sin_type = KvDataType::kFp32;
  r.max_position = 4096;
  r.rotary_dim = 64;
  r.style = RopeStyle::kGptj;
  r.num_query_heads = 128;
  r.query = fake(0x100000);
  r.query_token_stride = 128 * 192;
  r.query_head_stride = 192;
  return p;
}

TEST(ArgumentChecks, FusedStoreCacheWithRotary) {
  EXPECT_EQ(check(fused_rotary_params()), Status::kSuccess) << last_error_message();
  expect_rejected<FusedStoreParams>(fused_store_cache, fused_rotary_params, {
    {{"rotary dim 32", S::kErrorNotSupported, "rotary.rotary_dim"}, [](auto& p) { p.rotary.rotary_dim = 32; }},
    {{"style", S::kErrorInvalidArgument, "rotary.style"}, [](auto& p) { p.rotary.style = static_cast<RopeStyle>(3); }},
    {{"rounding", S::kErrorInvalidArgument, "rotary.rounding"}, [](auto& p) { p.rotary.rounding = static_cast<RopeRounding>(2); }},
    {{"positions type", S::kErrorInvalidArgument, "rotary.positions_type"}, [](auto& p) { p.rotary.positions_type = SlotType::kPageTable; }},
    {{"positions misaligned", S::kErrorMisalignedOperand, "rotary.positions"}, [](auto& p) { p.rotary.positions = fake(0x50004); }},
    {{"null cos/sin", S::kErrorInvalidArgument, "rotary.cos_sin_cache"}, [](auto& p) { p.rotary.cos_sin_cache = nullptr; }},
    {{"cos/sin row stride", S::kErrorMisalignedOperand, "rotary.cos_sin_cache"}, [](auto& p) { p.rotary.cos_sin_stride = 66; }},
    {{"max position 0", S::kErrorInvalidArgument, "rotary.max_position"}, [](auto& p) { p.rotary.max_position = 0; }},
    {{"q heads", S::kErrorNotSupported, "rotary.num_query_heads"}, [](auto& p) { p.rotary.num_query_heads = -1; }},
    {{"null query", S::kErrorInvalidArgument, "rotary.query"}, [](auto& p) { p.rotary.query = nullptr; }},
    {{"query head stride", S::kErrorMisalignedOperand, "rotary.query"}, [](auto& p) { p.rotary.query_head_stride = 196; }},
    {{"query_out misaligned", S::kErrorMisalignedOperand, "rotary.query_out"}, [](auto& p) { p.rotary.query_out = fake(0x200008); p.rotary.query_out_token_stride = 8192; p.rotary.query_out_head_stride = 64; }},
    {{"key_out misaligned", S::kErrorMisalignedOperand, "rotary.key_out"}, [](auto& p) { p.rotary.key_out = fake(0x70004); p.rotary.key_out_token_stride = 64; }},
    {{"key_out in place, other stride", S::kErrorInvalidArgument, "rotary.key_out == the rotated input"}, [](auto& p) { p.rotary.key_out = const_cast<void*>(p.rope); p.rotary.key_out_token_stride = 64; }},
    {{"cos/sin rows", S::kErrorInvalidArgument, "rotary.cos_sin_rows"}, [](auto& p) { p.rotary.cos_sin_rows = static_cast<RopeCosSinRows>(2); }},
    {{"cos/sin layout", S::kErrorInvalidArgument, "rotary.cos_sin_layout"}, [](auto& p) { p.rotary.cos_sin_layout = static_cast<RopeCosSinLayout>(-1); }},
    {{"a cos/sin row a row, too few", S::kErrorInvalidArgument, "rotary.max_position"}, [](auto& p) { p.rotary.positions = nullptr; p.rotary.cos_sin_rows = RopeCosSinRows::kByRow; p.rotary.max_position = p.batch.num_tokens - 1; }},
  });
  // A cos/sin row a row: positions unread (null, any type), the cache's rows at least the batch.
  {
    FusedStoreParams by_row = fused_rotary_params();
    by_row.rotary.positions = nullptr;
    by_row.rotary.positions_type = SlotType::kPageTable;
    by_row.rotary.cos_sin_rows = RopeCosSinRows::kByRow;
    by_row.rotary.max_position = by_row.batch.num_tokens;
    EXPECT_TRUE(rotates(by_row.rotary));
    EXPECT_EQ(check(by_row), Status::kSuccess) << last_error_message();
    by_row.rotary.cos_sin_layout = RopeCosSinLayout::kInterleaved;  // SGLang's freqs_cis
    EXPECT_EQ(check(by_row), Status::kSuccess) << last_error_message();
  }
  // In place: key_out is the RoPE input with its row stride; V3.2 and the V4.1 layouts rotate too.
  FusedStoreParams p = fused_rotary_params();
  p.rotary.key_out = const_cast<void*>(p.rope);
  p.rotary.key_out_token_stride = p.rope_row_stride;
  p.rotary.style = RopeStyle::kNeox;
  EXPECT_EQ(check(p), Status::kSuccess) << last_error_message();
  p.index_k = nullptr;
  p.kv_cache.layout = MlaLayout::kV41Fp4;
  p.kv_cache.page_stride_bytes = layout::min_page_stride(MlaLayout::kV41Fp4, 64);
  EXPECT_EQ(check(p), Status::kSuccess) << last_error_message();
}

// The layout table's entries are the contract's figures (docs/layouts.md).
TEST(LayoutTable, EntriesMatchTheContract) {
  struct Expected {
    MlaLayout layout;
    const char* name;
    int64_t token_bytes, data_row, page64;
    int32_t nope_dim, tile;
  };
  const Expected expected[] = {{MlaLayout::kV4, "v4", 584, 576, 37440, 448, 64},
                               {MlaLayout::kV32, "v32", 656, 656, 41984, 512, 128},
                               {MlaLayout::kV41, "v41", 528, 512, 33792, 448, 32},
                               {MlaLayout::kV41Fp4, "v41_fp4", 288, 256, 18432, 448, 16}};
  ASSERT_EQ(layout::kNumMlaLayouts, 4);
  for (const Expected& e : expected) {
    const layout::MlaLayoutInfo& info = layout::mla_layout(e.layout);
    EXPECT_STREQ(info.name, e.name);
    EXPECT_EQ(layout::token_bytes(info.rows), e.token_bytes) << e.name;
    EXPECT_EQ(info.rows.data_row, e.data_row) << e.name;
    EXPECT_EQ(layout::min_page_stride(e.layout, 64), e.page64) << e.name;
    EXPECT_EQ(info.nope_dim, e.nope_dim) << e.name;
    EXPECT_EQ(info.tile, e.tile) << e.name;
  }
  EXPECT_EQ(layout::token_bytes(layout::index_k_rows(IndexKFormat::kFp8, 128)), 132);
  EXPECT_EQ(layout::token_bytes(layout::index_k_rows(IndexKFormat::kFp4, 128)), 68);
  EXPECT_EQ(layout::token_bytes(layout::index_k_rows(IndexKFormat::kFp8, 512)), 528);
  EXPECT_EQ(layout::min_page_stride(IndexKFormat::kFp8, 1, 128), 132);
  EXPECT_FALSE(layout::is_mla_layout(static_cast<MlaLayout>(4)));
  EXPECT_FALSE(layout::is_mla_layout(static_cast<MlaLayout>(-1)));
  EXPECT_STREQ(layout::kv_cache_type(KvCacheType::kFp8E4m3).name, "fp8_e4m3");
}

TEST(Status, StringsAndVersion) {
  EXPECT_STREQ(status_string(Status::kSuccess), "kSuccess");
  EXPECT_STREQ(status_string(Status::kErrorInvalidArgument), "kErrorInvalidArgument");
  EXPECT_STREQ(status_string(Status::kErrorMisalignedOperand), "kErrorMisalignedOperand");
  EXPECT_STREQ(status_string(Status::kErrorNotSupported), "kErrorNotSupported");
  EXPECT_STREQ(status_string(Status::kErrorCapacityOverflow), "kErrorCapacityOverflow");
  EXPECT_STREQ(status_string(Status::kErrorArchMismatch), "kErrorArchMismatch");
  EXPECT_STREQ(status_string(Status::kErrorCudaRuntime), "kErrorCudaRuntime");
  EXPECT_STREQ(status_string(static_cast<Status>(99)), "kUnknownStatus");
  EXPECT_EQ(version(), CACHESTORE_VERSION_MAJOR * 10000 + CACHESTORE_VERSION_MINOR * 100 +
                           CACHESTORE_VERSION_PATCH);
}

// move_pages' overlap refusal compares each layer's own bytes: two layers of separate
// allocations one stride apart leave a gap where another buffer (a pinned staging buffer, in
// the one address space) may sit. Addresses only; nothing is read.
TEST(ArgumentChecks, MovePagesOverlapIsPerLayer) {
  MovePagesParams p;
  p.num_entries = 4;
  p.num_layers = 3;
  p.rows[0] = {1, 256};
  const auto side = [](uintptr_t data, int64_t layer_stride) {
    PageSide s;
    s.data = reinterpret_cast<void*>(data);
    s.num_pages = 16;
    s.page_size = 4;
    s.layer_stride = layer_stride;
    s.planes[0] = {0, 256 * 4, 256, 256};  // 16 KiB a layer
    return s;
  };
  constexpr uintptr_t kBase = uintptr_t{1} << 40;
  constexpr int64_t kStride = 1 << 20, kLayer = 1 << 14;
  p.src = side(kBase, kStride);
  // A staging buffer of three contiguous layers in a gap, just after a layer, just before the
  // first: accepted; one byte into a layer: refused.
  for (const uintptr_t dst : {kBase + (1 << 16), kBase + kLayer, kBase + kStride + kLayer,
                              kBase - 3 * kLayer}) {
    MovePagesParams q = p;
    q.dst = side(dst, kLayer);
    EXPECT_EQ(check(q), S::kSuccess) << last_error_message();
  }
  for (const uintptr_t dst : {kBase + kStride - 3 * kLayer + 1, kBase + 2 * kStride + kLayer - 1,
                              kBase - 3 * kLayer + 1}) {
    MovePagesParams q = p;
    q.dst = side(dst, kLayer);
    EXPECT_EQ(check(q), S::kErrorInvalidArgument);
    EXPECT_NE(std::string(last_error_message()).find("src and dst overlap"), std::string::npos);
  }
  // One layer each, either way round.
  for (const int64_t gap : {int64_t{0}, int64_t{1} << 20, -(int64_t{1} << 20)}) {
    MovePagesParams one = p;
    one.num_layers = 1;
    one.src = side(kBase, 0);
    one.dst = side(kBase + (gap >= 0 ? kLayer + gap : gap - kLayer), 0);
    EXPECT_EQ(check(one), S::kSuccess) << gap << ": " << last_error_message();
    one.dst = side(kBase + (gap >= 0 ? kLayer - 1 : 1 - kLayer), 0);
    EXPECT_EQ(check(one), S::kErrorInvalidArgument) << gap;
  }
  // Layers interleaved with the source's: each in a gap, then each touching one.
  MovePagesParams q = p;
  q.dst = side(kBase + (1 << 16), kStride);
  EXPECT_EQ(check(q), S::kSuccess) << last_error_message();
  q.dst = side(kBase + kLayer - 1, kStride);
  EXPECT_EQ(check(q), S::kErrorInvalidArgument);
}

// The paged K/V block shapes: a power of two (or whole warps) of a row's vectors at decode sizes;
// packed (the wide form) exactly a row's vectors and as many rows as fit, so no lane idles.
TEST(PagedKvShape, PackedRowsFillTheBlock) {
  const tuning::StorePolicy& p = tuning::kHopperPolicy;
  const auto shape = [&](int64_t rows, int32_t vectors, bool packed) {
    const tuning::PagedKvShape s = tuning::paged_kv_shape(p, rows, vectors, 132, packed);
    return std::make_pair(s.vectors_per_block_row, s.rows_per_block);
  };
  EXPECT_EQ(shape(1, 18, false), std::make_pair(32, 2));
  EXPECT_EQ(shape(1, 72, false), std::make_pair(96, 1));
  EXPECT_EQ(shape(1 << 18, 18, false), std::make_pair(32, 8));  // 14 of 32 lanes idle
  EXPECT_EQ(shape(1 << 18, 18, true), std::make_pair(18, 14));  // vLLM's MLA rows, four a thread
  EXPECT_EQ(shape(1 << 18, 64, true), shape(1 << 18, 64, false));  // H = 8, D = 128: unchanged
  EXPECT_EQ(shape(1 << 18, 48, true), std::make_pair(48, 5));
  EXPECT_EQ(shape(1 << 18, 256, true), std::make_pair(256, 1));
  EXPECT_EQ(shape(1 << 18, 300, true), shape(1 << 18, 300, false));  // wider than a block
  for (int32_t vectors = 1; vectors <= 1024; ++vectors) {
    const auto [bx, by] = shape(1 << 18, vectors, true);
    EXPECT_LE(bx * by, tuning::kPagedKvMaxThreads) << vectors;
    EXPECT_GE(bx * by, vectors <= p.paged_kv.max_threads ? p.paged_kv.max_threads - vectors + 1
                                                         : p.paged_kv.max_threads)
        << vectors;
  }
}

// CACHESTORE_TUNING's fields over a policy, and what a wrong one is told.
std::string override_error(const char* spec, tuning::StorePolicy* p) {
  char error[160] = "";
  return tuning::apply_overrides(spec, p, error, sizeof error) ? "" : error;
}

TEST(TuningOverrides, FieldsSetAndRefusals) {
  tuning::StorePolicy p = tuning::kHopperPolicy;
  EXPECT_EQ(override_error("", &p), "");
  EXPECT_EQ(p.paged_kv.wide_rows, tuning::kHopperPolicy.paged_kv.wide_rows);
  EXPECT_EQ(override_error("paged_kv.wide_rows=1,values_per_lane.eight_max_rows=77", &p), "");
  EXPECT_EQ(p.paged_kv.wide_rows, 1);
  EXPECT_EQ(p.values_per_lane.eight_max_rows, 77);
  EXPECT_EQ(p.values_per_lane.four_max_rows, tuning::kHopperPolicy.values_per_lane.four_max_rows);
  EXPECT_EQ(p.mla.freqs_cis_kernel, 1);
  EXPECT_EQ(override_error("mla.freqs_cis_kernel=0", &p), "");
  EXPECT_EQ(p.mla.freqs_cis_kernel, 0);
  EXPECT_EQ(p.paged_kv.gptj_pair_rows, 512);
  EXPECT_EQ(override_error("paged_kv.gptj_pair_rows=0", &p), "");
  EXPECT_EQ(p.paged_kv.gptj_pair_rows, 0);
  EXPECT_EQ(tuning::paged_kv_vectors_per_thread(p, 1, 256), tuning::kPagedKvWideVectors);
  EXPECT_EQ(tuning::paged_kv_vectors_per_thread(p, 1, 258), 1);  // 4 does not divide the row
  EXPECT_EQ(override_error("paged_kv.wide_rows=0,", &p), "");
  EXPECT_EQ(tuning::paged_kv_vectors_per_thread(p, 1 << 20, 256), 1);
  EXPECT_EQ(override_error("mla.rope_wide_q_rows=1", &p),
            "'mla.rope_wide_q_rows' is not a field that can be set");

  const tuning::StorePolicy before = p;
  EXPECT_EQ(override_error("paged_kv.max_threads=64", &p),
            "'paged_kv.max_threads' is not a field that can be set");
  EXPECT_EQ(override_error("paged_kv.wide_rows", &p),
            "'paged_kv.wide_rows' has no value (field=value)");
  EXPECT_EQ(override_error("paged_kv.wide_rows=-1", &p),
            "paged_kv.wide_rows = '-1': must be a whole number >= 0");
  EXPECT_EQ(override_error("paged_kv.wide_rows=12k,values_per_lane.four_max_rows=3", &p),
            "paged_kv.wide_rows = '12k': must be a whole number >= 0");
  EXPECT_EQ(override_error("paged_kv.wide_rows=", &p),
            "paged_kv.wide_rows = '': must be a whole number >= 0");
  EXPECT_EQ(override_error(",", &p), "'' is not a field that can be set");
  EXPECT_EQ(p.paged_kv.wide_rows, before.paged_kv.wide_rows);
}

}  // namespace
}  // namespace cachestore::test
