// A page table (FlashInfer's form, SlotType::kPageTable) built from the slots a test wants, so
// that every case written for slot mappings runs through the page-table source too. Its device
// buffers keep their sizes (and addresses) across steps, so a captured graph reads new tables.
#pragma once

#include "gpu_support.cuh"

namespace cachestore::test {

class PageTableSource {
 public:
  // Request i holds row i's page; one more request has no pages. Requests hold 1 to 3 pages.
  PageTableSource(Scenario& sc, int64_t rows)
      : rows_(rows),
        batch_(static_cast<int32_t>(rows + 1)),
        batch_indices_(&sc.input(std::vector<uint8_t>(4 * rows))),
        positions_(&sc.input(std::vector<uint8_t>(4 * rows))),
        indptr_(&sc.input(std::vector<uint8_t>(4 * (rows + 2)))),
        indices_(&sc.input(std::vector<uint8_t>(4 * (3 * rows + 1)))) {}

  // The table whose lookup gives slots[i] for row i with a slot >= 0. A negative slot becomes a
  // lookup that fails, by one of five faults picked by the row: a batch index of -1 or of the
  // batch size, a negative position, a position past its request's pages, or a negative page id.
  // `pages`: the global page count, from which the requests' other pages are drawn.
  void set_slots(const std::vector<int64_t>& slots, int32_t page_size, int64_t pages) {
    std::vector<int32_t> batch_indices(rows_), positions(rows_), indptr(rows_ + 2, 0);
    std::vector<int32_t> indices(3 * rows_ + 1, 0);
    int32_t next = 0;
    for (int64_t i = 0; i < rows_; ++i) {
      const int64_t slot = slots[i];
      const int32_t before = static_cast<int32_t>(i % 3);  // pages before the row's page
      indptr[i] = next;
      for (int32_t k = 0; k < before; ++k)
        indices[next + k] = static_cast<int32_t>((i * 7919 + k * 104729) % pages);
      const int32_t offset = static_cast<int32_t>((slot >= 0 ? slot : -slot) % page_size);
      indices[next + before] = static_cast<int32_t>(slot >= 0 ? slot / page_size : i % pages);
      batch_indices[i] = static_cast<int32_t>(i);
      positions[i] = before * page_size + offset;
      if (slot < 0) {
        switch (i % 5) {
          case 0: batch_indices[i] = -1; break;
          case 1: batch_indices[i] = batch_; break;
          case 2: positions[i] = -1 - static_cast<int32_t>(i); break;
          case 3: positions[i] = (before + 1) * page_size + offset; break;
          default: indices[next + before] = -1 - static_cast<int32_t>(i); break;
        }
      }
      next += before + 1;
    }
    indptr[rows_] = next;  // the last request (batch index rows) has no pages
    indptr[rows_ + 1] = next;
    batch_indices_->host = as_bytes(batch_indices);
    positions_->host = as_bytes(positions);
    indptr_->host = as_bytes(indptr);
    indices_->host = as_bytes(indices);
  }

  // The slot mapping that reads this table (data: the batch indices).
  SlotMapping slots(Side side, int64_t reserved, int32_t owner_rank, int32_t owner_size) {
    SlotMapping m{batch_indices_->ptr(side), SlotType::kPageTable, reserved, owner_rank,
                  owner_size};
    m.page_table = {static_cast<const int32_t*>(positions_->ptr(side)),
                    static_cast<const int32_t*>(indptr_->ptr(side)),
                    static_cast<const int32_t*>(indices_->ptr(side)), batch_};
    return m;
  }

 private:
  int64_t rows_;
  int32_t batch_;
  Mirror *batch_indices_, *positions_, *indptr_, *indices_;
};

}  // namespace cachestore::test
