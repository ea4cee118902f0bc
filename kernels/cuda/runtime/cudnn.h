// kernels/cuda/runtime/cudnn.h — cuDNN for the engine: one handle per device, bound to that
// device's compute stream, and BAREYOLO_CUDNN_CHECK, which turns a failed call into an exception
// naming the call, file:line, cuDNN's message for the status and its last detailed error.
// A handle must not be used by two host threads at once; the engine issues each device's work
// from one thread.
#pragma once

#include <cudnn.h>

namespace bareyolo::cuda {

[[noreturn]] void throw_cudnn_error(cudnnStatus_t status, const char* call, const char* file,
                                    int line);
inline void check_cudnn(cudnnStatus_t status, const char* call, const char* file, int line) {
  if (status != CUDNN_STATUS_SUCCESS) throw_cudnn_error(status, call, file, line);
}

// The cuDNN handle of `device` (created on first use, never destroyed).
cudnnHandle_t cudnn_handle(int device);

}  // namespace bareyolo::cuda

#define BAREYOLO_CUDNN_CHECK(call) ::bareyolo::cuda::check_cudnn((call), #call, __FILE__, __LINE__)
