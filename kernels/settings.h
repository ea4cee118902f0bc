// kernels/settings.h — the kernels' process-wide switches: they change how some ops compute (in
// which order, on which units, by which implementation), never what. Part of the dispatch layer
// (device_memory.h says why it exists): code above kernels/ sets them here, not in the CUDA
// runtime; a build without CUDA records the GPU ones, which no CPU kernel reads. The Solver sets
// TF32, Winograd and the cuDNN algorithms from its options (models/train/solver.h).
#pragma once

#include "kernels/cuda/cuda_ops.h"  // cuda::ConvPath

namespace bareyolo::ops {

struct KernelSettings {
  // TF32 tensor-core math for GPU float convolutions (cuDNN) and GEMMs (cuBLAS): operands
  // rounded to TF32, about 1e-3 relative error per product instead of float's 1e-7.
  bool tf32 = false;
  // Winograd F(2x2, 3x3) for the CPU's 3x3 stride-1 convolutions where its measured rule picks
  // it (fewer multiplications, other last bits); false: im2col + GEMM: cpu/winograd.h.
  bool winograd = true;
  // Deterministic cuDNN convolution algorithms only where cuDNN has one (--cudnn
  // deterministic); false lets cuDNN's fastest-ranked run, atomics and all (--cudnn fast).
  bool cudnn_deterministic = true;
};

void use_settings(const KernelSettings& settings);

// TF32 alone (what use_settings sets), and whether it is on.
void set_gpu_tf32(bool enabled);
bool gpu_tf32();
// Whether the GPU's convolutions keep to deterministic algorithms (what use_settings sets).
bool gpu_cudnn_deterministic();

// Which implementation runs the GPU's float convolutions: cuDNN, or im2col + cuBLAS SGEMM (kept
// to compare against); BAREYOLO_CONV in the environment chooses until it is set here.
using GpuConvolutionPath = cuda::ConvPath;
GpuConvolutionPath gpu_convolution_path();
void set_gpu_convolution_path(GpuConvolutionPath path);

}  // namespace bareyolo::ops
