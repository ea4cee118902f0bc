// kernels/cpu/settings.cpp — see kernels/settings.h.
#include "kernels/settings.h"

#include "kernels/cpu/winograd.h"
#include "kernels/cuda/runtime/runtime.h"

namespace bareyolo::ops {

void use_settings(const KernelSettings& settings) {
  cuda::set_tf32(settings.tf32);  // a build without CUDA records it (runtime_none.cpp)
  cpu::set_winograd_use(settings.winograd ? cpu::WinogradUse::kMeasuredRule
                                          : cpu::WinogradUse::kNever);
}

}  // namespace bareyolo::ops
