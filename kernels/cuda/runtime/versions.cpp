// kernels/cuda/runtime/versions.cpp — see versions.h. CUDA builds only.
#include "kernels/cuda/runtime/versions.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include "kernels/cuda/runtime/check.h"

namespace bareyolo::cuda {

namespace {

// CUDA encodes its versions as 1000 major + 10 minor (13000 = 13.0).
Version cuda_version(int code) { return {code / 1000, code % 1000 / 10, 0}; }

Version cublas_loaded() {
  int major = 0, minor = 0, patch = 0;
  cublasGetProperty(MAJOR_VERSION, &major);
  cublasGetProperty(MINOR_VERSION, &minor);
  cublasGetProperty(PATCH_LEVEL, &patch);
  return {major, minor, patch};
}

// cuDNN 9 encodes its version as 10000 major + 100 minor + patch (91900 = 9.19.0).
Version cudnn_version(size_t code) {
  return {int(code / 10000), int(code % 10000 / 100), int(code % 100)};
}

}  // namespace

std::vector<LibraryVersion> library_versions() {
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  (void)cudaGetLastError();
  return {
      {"CUDA driver", cuda_version(driver), std::nullopt},
      {"CUDA runtime", cuda_version(runtime), cuda_version(CUDART_VERSION)},
      {"cuBLAS", cublas_loaded(), Version{CUBLAS_VER_MAJOR, CUBLAS_VER_MINOR, CUBLAS_VER_PATCH}},
      {"cuDNN", cudnn_version(cudnnGetVersion()), cudnn_version(CUDNN_VERSION)},
  };
}

DeviceProperties device_properties(int device) {
  cudaDeviceProp properties{};
  BAREYOLO_CUDA_CHECK(cudaGetDeviceProperties(&properties, device));
  return {properties.name, double(properties.totalGlobalMem) / double(1 << 30), properties.major,
          properties.minor};
}

}  // namespace bareyolo::cuda
