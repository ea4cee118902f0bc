// kernels/cuda/runtime/versions_none.cpp — versions.h for a binary built without CUDA: no
// library to report, no device to describe.
#include <stdexcept>

#include "kernels/cuda/runtime/versions.h"

namespace bareyolo::cuda {

std::vector<LibraryVersion> library_versions() { return {}; }

DeviceProperties device_properties(int device) {
  throw std::runtime_error("cuda:" + std::to_string(device) +
                           ": this binary was built without CUDA");
}

}  // namespace bareyolo::cuda
