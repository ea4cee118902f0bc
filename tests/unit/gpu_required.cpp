// tests/unit/gpu_required.cpp — cuda::gpu_required (kernels/cuda/runtime/runtime.h), which turns
// a CUDA runner's "no GPU, skipped" (exit 77) into a failure: set by BAREYOLO_REQUIRE_GPU, or by
// an installed NVIDIA driver (/dev/nvidia0), in either build.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>

#include "kernels/cuda/runtime/runtime.h"

using namespace bareyolo;

namespace {

// Sets BAREYOLO_REQUIRE_GPU for a scope (unset for nullopt) and restores it afterwards.
class RequireGpuVariable {
 public:
  explicit RequireGpuVariable(const std::optional<std::string>& value) {
    if (const char* old = std::getenv(kName)) saved_ = old;
    if (value)
      setenv(kName, value->c_str(), 1);
    else
      unsetenv(kName);
  }
  ~RequireGpuVariable() {
    if (saved_)
      setenv(kName, saved_->c_str(), 1);
    else
      unsetenv(kName);
  }
  RequireGpuVariable(const RequireGpuVariable&) = delete;
  RequireGpuVariable& operator=(const RequireGpuVariable&) = delete;

 private:
  static constexpr const char* kName = "BAREYOLO_REQUIRE_GPU";
  std::optional<std::string> saved_;
};

bool driver_installed() {
  std::error_code error;
  return std::filesystem::exists("/dev/nvidia0", error);
}

}  // namespace

TEST_CASE("cuda gpu_required: BAREYOLO_REQUIRE_GPU set to anything but 0 requires a GPU") {
  for (const char* value : {"1", "yes"}) {
    CAPTURE(value);
    const RequireGpuVariable variable(std::string{value});
    CHECK(cuda::gpu_required());
    CHECK(cuda::gpu_required_reason() == std::string("BAREYOLO_REQUIRE_GPU=") + value + " is set");
  }
}

TEST_CASE("cuda gpu_required: unset, empty or 0, only an installed driver requires a GPU") {
  for (const std::optional<std::string>& value :
       {std::optional<std::string>{}, std::optional<std::string>{""},
        std::optional<std::string>{"0"}}) {
    CAPTURE(value.value_or("(unset)"));
    const RequireGpuVariable variable(value);
    CHECK(cuda::gpu_required() == driver_installed());
    CHECK(cuda::gpu_required_reason() == (driver_installed() ? "/dev/nvidia0 exists" : ""));
  }
}
