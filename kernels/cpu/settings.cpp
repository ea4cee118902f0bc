// kernels/cpu/settings.cpp — see kernels/settings.h: the GPU's switches live in kernels/cuda (the
// runtime's TF32 and cuDNN flags, conv2d.cu's path) or in their stand-ins without CUDA.
#include "kernels/settings.h"

#include "kernels/cpu/winograd.h"
#include "kernels/cuda/runtime/runtime.h"

namespace bareyolo::ops {

void use_settings(const KernelSettings& settings) {
  set_gpu_tf32(settings.tf32);
  cuda::set_cudnn_deterministic(settings.cudnn_deterministic);
  cpu::set_winograd_use(settings.winograd ? cpu::WinogradUse::kMeasuredRule
                                          : cpu::WinogradUse::kNever);
}

void set_gpu_tf32(bool enabled) { cuda::set_tf32(enabled); }
bool gpu_tf32() { return cuda::tf32_enabled(); }
bool gpu_cudnn_deterministic() { return cuda::cudnn_deterministic(); }

GpuConvolutionPath gpu_convolution_path() { return cuda::conv_path(); }
void set_gpu_convolution_path(GpuConvolutionPath path) { cuda::set_conv_path(path); }

}  // namespace bareyolo::ops
