// kernels/cuda/runtime/stream.h — a device's compute stream (runtime.h's compute_stream) as the
// cudaStream_t that kernel launches and CUDA's libraries take: the one cast, for the CUDA sources
// (runtime.h itself stays free of CUDA's headers, so that every build compiles it).
#pragma once

#include <cuda_runtime.h>

#include "kernels/cuda/runtime/runtime.h"
#include "kernels/view.h"

namespace bareyolo::cuda {

inline cudaStream_t stream_of(int device) {
  return static_cast<cudaStream_t>(compute_stream(device));
}
inline cudaStream_t stream_of(const Device& device) { return stream_of(device.index); }

}  // namespace bareyolo::cuda
