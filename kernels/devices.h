// kernels/devices.h — which devices this process has: the GPUs, whether this binary can use
// them, why not, what they are and which CUDA libraries drive them (`bareyolo devices`, the
// launcher, the selftest).
//
// Part of the dispatch layer (device_memory.h says why it exists): code above kernels/ asks
// these instead of the CUDA runtime, and a build without CUDA answers them too (no GPUs, and
// why).
#pragma once

#include <string>
#include <vector>

#include "kernels/cuda/runtime/versions.h"
#include "kernels/view.h"

namespace bareyolo {

// True when this binary contains the CUDA backend.
bool cuda_compiled();
// True when this binary can use memory on `device`: the CPU always, a GPU only with CUDA.
bool supported_by_this_build(const Device& device);
// Number of usable GPUs: 0 without CUDA, without a driver or without a device. Never throws.
int usable_gpu_count();
// Why usable_gpu_count() is 0, as a sentence for the user ("" when it is not).
std::string gpu_unavailable_reason();
// True once this process has initialised CUDA on a machine with a GPU. Such a process must not
// fork workers that use CUDA: the driver's state does not survive fork().
bool cuda_initialized();
// Why this machine must have a usable GPU (BAREYOLO_REQUIRE_GPU is on, or an NVIDIA driver is
// installed), or "" when it need not: there, no GPU is a failure, never a skip.
std::string gpu_required_reason();

// What GPU `gpu` is: its name, memory and compute capability. Throws without CUDA.
using GpuProperties = cuda::DeviceProperties;
GpuProperties gpu_properties(int gpu);

// A library's loaded and compiled-against versions ("cuDNN 9.19.0 (compiled against 9.19.0)").
using LibraryVersion = cuda::LibraryVersion;
// The CUDA driver, runtime, cuBLAS and cuDNN this process loaded; empty without CUDA.
std::vector<LibraryVersion> gpu_library_versions();

}  // namespace bareyolo
