// kernels/cpu/devices.cpp — see kernels/devices.h: the answers come from kernels/cuda/runtime,
// whose stand-ins answer in a build without CUDA (no GPUs, and why).
#include "kernels/devices.h"

#include "kernels/cuda/runtime/runtime.h"

namespace bareyolo {

bool cuda_compiled() { return cuda::compiled(); }
bool supported_by_this_build(const Device& device) { return device.is_cpu() || cuda_compiled(); }
int usable_gpu_count() { return cuda::device_count(); }
std::string gpu_unavailable_reason() { return cuda::unavailable_reason(); }
bool cuda_initialized() { return cuda::initialized(); }
std::string gpu_required_reason() { return cuda::gpu_required_reason(); }
GpuProperties gpu_properties(int gpu) { return cuda::device_properties(gpu); }
std::vector<LibraryVersion> gpu_library_versions() { return cuda::library_versions(); }

}  // namespace bareyolo
