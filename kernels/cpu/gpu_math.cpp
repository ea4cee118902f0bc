// kernels/cpu/gpu_math.cpp — see kernels/gpu_math.h: the switches live in kernels/cuda (the
// runtime's TF32 flag, conv2d.cu's path), or in their stand-ins without CUDA.
#include "kernels/gpu_math.h"

#include "kernels/cuda/runtime/runtime.h"

namespace bareyolo {

void set_gpu_tf32(bool enabled) { cuda::set_tf32(enabled); }
GpuConvolutionPath gpu_convolution_path() { return cuda::conv_path(); }
void set_gpu_convolution_path(GpuConvolutionPath path) { cuda::set_conv_path(path); }

}  // namespace bareyolo
