// tests/datasets/datasets_testing.h — where the shared real datasets are: $BAREYOLO_DATASETS, else
// the folder CMake passes (../shared/datasets next to the source tree).
#pragma once

#include <cstdlib>
#include <filesystem>

namespace bareyolo::testing {

inline std::filesystem::path shared_datasets() {
  if (const char* dir = std::getenv("BAREYOLO_DATASETS"); dir && *dir) return dir;
  return BAREYOLO_SHARED_DATASETS;
}

}  // namespace bareyolo::testing
