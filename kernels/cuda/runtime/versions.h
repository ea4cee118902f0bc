// kernels/cuda/runtime/versions.h — the GPUs and the CUDA libraries this process actually loaded,
// beside the versions it was compiled against (`bareyolo devices`, tools/gpu_check.sh).
//
// On a GPU machine the libraries come from wherever LD_LIBRARY_PATH points (often PyTorch's
// wheels), not from the toolkit the binary was built with. cuDNN and NCCL promise to run with
// the same or a newer minor version than the one compiled against; an older one may work or
// fail in odd places, so it is reported as a warning, not refused.
#pragma once

#include <compare>
#include <optional>
#include <string>
#include <vector>

namespace bareyolo::cuda {

struct Version {
  int major = 0, minor = 0, patch = 0;
  std::string str() const {  // "9.19.0"
    return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
  }
  auto operator<=>(const Version&) const = default;
};

struct LibraryVersion {
  std::string name;                 // "cuDNN"
  Version loaded;                   // what this process runs with
  std::optional<Version> compiled;  // what the binary was built against (none for the driver)

  std::string str() const {  // "cuDNN 9.19.0 (compiled against 9.19.0)"
    const std::string against = compiled ? " (compiled against " + compiled->str() + ")" : "";
    return name + " " + (loaded == Version{} ? "not loaded" : loaded.str()) + against;
  }
  // A sentence when `loaded` is older than `compiled`.
  std::optional<std::string> warning() const {
    if (!compiled || !(loaded < *compiled)) return std::nullopt;
    return "warning: " + name + " " + loaded.str() + " is older than the " + compiled->str() +
           " this binary was compiled against; it may fail in odd places: put a " +
           compiled->str() + " or newer first on LD_LIBRARY_PATH";
  }
};

// The driver's CUDA version, the runtime, cuBLAS and cuDNN, loaded and compiled; empty in a
// build without CUDA. Never throws: a library that cannot say reports 0.0.0.
std::vector<LibraryVersion> library_versions();

struct DeviceProperties {
  std::string name;
  double memory_gib = 0;
  int compute_major = 0, compute_minor = 0;
};
DeviceProperties device_properties(int device);

}  // namespace bareyolo::cuda
