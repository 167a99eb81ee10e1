// main() of the GPU tests. Without a usable device none of them is listed or run but one,
// GpuAvailability.<cause> (no_NVIDIA_driver, no_CUDA_device, ...), which skips with the reason:
// ctest reports the GPU tests as that one skipped test, named by why. CACHESTORE_REQUIRE_GPU=1
// makes it a failure. With a device, GpuAvailability.Device passes and names it.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "gpu_presence.h"

namespace {

bool require_gpu() {
  const char* v = std::getenv("CACHESTORE_REQUIRE_GPU");
  return v != nullptr && std::string(v) == "1";
}

TEST(GpuAvailability, Device) {
  int device = 0;
  cudaDeviceProp prop{};
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  ASSERT_EQ(cudaGetDeviceProperties(&prop, device), cudaSuccess);
  RecordProperty("device", prop.name);
}

class NoGpu : public ::testing::Test {
 public:
  explicit NoGpu(std::string reason) : reason_(std::move(reason)) {}
  void TestBody() override {
    if (require_gpu()) FAIL() << "CACHESTORE_REQUIRE_GPU=1 but " << reason_;
    GTEST_SKIP() << reason_ << ": the GPU tests are not run (CACHESTORE_REQUIRE_GPU=1 fails "
                 << "instead)";
  }

 private:
  std::string reason_;
};

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const cachestore::test::GpuAbsence gpu = cachestore::test::gpu_absence();
  if (gpu.absent()) {
    const std::string reason = gpu.reason;
    ::testing::RegisterTest("GpuAvailability", gpu.code.c_str(), nullptr, nullptr, __FILE__,
                            __LINE__, [reason]() -> ::testing::Test* { return new NoGpu(reason); });
    GTEST_FLAG_SET(filter, "GpuAvailability." + gpu.code);
  }
  return RUN_ALL_TESTS();
}
