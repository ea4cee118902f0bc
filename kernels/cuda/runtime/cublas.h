// kernels/cuda/runtime/cublas.h — cuBLAS for the engine: one handle per device, bound to that
// device's compute stream, and BAREYOLO_CUBLAS_CHECK, which turns a failed call into an exception
// naming the call, file:line and cuBLAS's own message (BAREYOLO_CUBLAS_CHECK_LAUNCH: the same
// for a call that queues work, which it also counts).
//
// Math mode: CUBLAS_DEFAULT_MATH, which for float never drops to TF32 (TF32 keeps 10 mantissa
// bits, and a CUDA result must match the float CPU reference to a few ulps per term), unless
// cuda::set_tf32(true) asked for CUBLAS_TF32_TENSOR_OP_MATH. cublas_handle applies the setting
// each time it hands out the handle, so a change reaches handles created before it.
// A handle must not be used by two host threads at once; the engine issues each device's work
// from one thread.
#pragma once

#include <cublas_v2.h>

#include "kernels/cuda/runtime/check.h"

namespace bareyolo::cuda {

[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* call, const char* file,
                                     int line);
inline void check_cublas(cublasStatus_t status, const char* call, const char* file, int line) {
  if (status != CUBLAS_STATUS_SUCCESS) throw_cublas_error(status, call, file, line);
}

// The cuBLAS handle of `device` (created on first use, never destroyed), in the math mode of
// tf32_enabled(); call it for each GEMM rather than keeping the handle.
cublasHandle_t cublas_handle(int device);

}  // namespace bareyolo::cuda

#define BAREYOLO_CUBLAS_CHECK(call) \
  ::bareyolo::cuda::check_cublas((call), #call, __FILE__, __LINE__)
// A cuBLAS call that queues work (a GEMM): counted as one launch (check.h), then checked.
#define BAREYOLO_CUBLAS_CHECK_LAUNCH(call) \
  (::bareyolo::cuda::count_launch(),       \
   ::bareyolo::cuda::check_cublas((call), #call, __FILE__, __LINE__))
