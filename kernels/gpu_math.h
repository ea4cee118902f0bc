// kernels/gpu_math.h — the process-wide switches that choose how the GPU kernels compute:
// TF32 tensor-core math, and which convolution implementation runs.
//
// Part of the dispatch layer (device_memory.h says why it exists): code above kernels/ sets
// them here instead of in the CUDA runtime. A build without CUDA only records them: there is no
// GPU math to switch, and the CPU kernels ignore both.
#pragma once

#include "kernels/cuda/cuda_ops.h"

namespace bareyolo {

// On: float convolutions (cuDNN) and GEMMs (cuBLAS) may round their operands to TF32, about
// 1e-3 relative error per product, for the tensor cores' throughput. Off by default.
void set_gpu_tf32(bool enabled);

// cuDNN, or im2col + cuBLAS SGEMM (kept to compare against); BAREYOLO_CONV in the environment
// chooses until set_gpu_convolution_path is called.
using GpuConvolutionPath = cuda::ConvPath;
GpuConvolutionPath gpu_convolution_path();
void set_gpu_convolution_path(GpuConvolutionPath path);

}  // namespace bareyolo
