// tests/unit/library_versions.cpp — how `bareyolo devices` reports a CUDA library: loaded beside
// compiled, and a warning (not an error) for one older than the binary was built against.
#include "kernels/cuda/runtime/versions.h"
#include "tests/support/testing.h"

using namespace bareyolo::cuda;

TEST_CASE("a library older than the one compiled against gets a warning naming both") {
  const LibraryVersion same{"cuDNN", {9, 19, 0}, Version{9, 19, 0}};
  const LibraryVersion newer{"cuDNN", {9, 20, 1}, Version{9, 19, 0}};
  const LibraryVersion older{"cuDNN", {9, 8, 2}, Version{9, 19, 0}};
  CHECK(same.str() == "cuDNN 9.19.0 (compiled against 9.19.0)");
  CHECK_FALSE(same.warning());
  CHECK_FALSE(newer.warning());
  REQUIRE(older.warning());
  CHECK(older.warning()->find("cuDNN 9.8.2 is older than the 9.19.0") != std::string::npos);
  // Minor versions compare as numbers, not as text ("8" < "19").
  CHECK(Version{9, 8, 0} < Version{9, 19, 0});
  const LibraryVersion driver{"CUDA driver", {}, std::nullopt};
  CHECK(driver.str() == "CUDA driver not loaded");
  CHECK_FALSE(driver.warning());
}
