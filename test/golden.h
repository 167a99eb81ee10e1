// The peers' golden records (test/data/golden, copied from shared/golden: written on an H200 by
// vLLM's indexer_k_quant_and_cache and concat_and_cache_ds_mla and SGLang's
// fused_store_flashmla_cache; see test/data/golden/README.md).
#pragma once

#include <cstdint>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace cachestore::test {

inline constexpr int kGoldenRows = 256;
inline constexpr int kGoldenCols = 1024;

template <typename T>
std::vector<T> read_golden(const std::string& name, size_t count) {
  const std::string path = std::string(CACHESTORE_TEST_DATA_DIR) + "/golden/" + name;
  std::ifstream in(path, std::ios::binary);
  std::vector<T> data(count);
  if (!in.read(reinterpret_cast<char*>(data.data()), static_cast<std::streamsize>(count * sizeof(T))))
    throw std::runtime_error("cannot read " + path);
  return data;
}

inline std::vector<uint16_t> golden_input() {
  return read_golden<uint16_t>("input_bf16_256x1024.bin", size_t{kGoldenRows} * kGoldenCols);
}

}  // namespace cachestore::test
