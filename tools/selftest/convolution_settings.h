// tools/selftest/convolution_settings.h — the GPU's convolution path (cuDNN, or im2col + cuBLAS)
// and TF32 for one check, put back as they were when it ends, also when it throws, so that no
// later check or test runs with another check's settings (kernels/settings.h). The CPU has one
// convolution and no TF32: a build without CUDA records both settings, and the CPU's kernels
// ignore them, so with the CPU as the device under test every variant runs its float
// convolution (a TF32 check then passes at float's error, far inside its tolerance).
#pragma once

#include "kernels/settings.h"

namespace bareyolo::selftest {

class ConvolutionSettings {
 public:
  ConvolutionSettings(ops::GpuConvolutionPath path, bool tf32) {
    ops::set_gpu_convolution_path(path);
    ops::set_gpu_tf32(tf32);
  }
  ~ConvolutionSettings() {
    ops::set_gpu_convolution_path(saved_path_);
    ops::set_gpu_tf32(saved_tf32_);
  }
  ConvolutionSettings(const ConvolutionSettings&) = delete;
  ConvolutionSettings& operator=(const ConvolutionSettings&) = delete;

 private:
  const ops::GpuConvolutionPath saved_path_ = ops::gpu_convolution_path();
  const bool saved_tf32_ = ops::gpu_tf32();
};

// The paths' names in the checks' names.
inline const char* path_name(ops::GpuConvolutionPath path) {
  return path == ops::GpuConvolutionPath::gemm ? "gemm" : "cudnn";
}
inline constexpr ops::GpuConvolutionPath kConvPaths[] = {ops::GpuConvolutionPath::cudnn,
                                                         ops::GpuConvolutionPath::gemm};

}  // namespace bareyolo::selftest
