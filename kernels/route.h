// kernels/route.h — how an op defined in kernels/cpu/ hands a call to its CUDA kernel.
//
// The CPU implementation of each op in kernels/ops.h is the op's definition (it is the
// reference everything else is tested against). Its first statement routes the call:
// views on a GPU go to the op's CUDA kernel (float only; kernels/cuda/cuda_ops.h), views in
// host memory fall through to the CPU code below it. An op without a CUDA kernel yet says so.
#pragma once

#include <stdexcept>
#include <string>
#include <type_traits>

#include "kernels/view.h"

namespace bareyolo::detail {

// The one device all views of a call live on; throws naming the op when they differ.
template <class First, class... Rest>
Device common_device(const char* op, const First& first, const Rest&... rest) {
  if constexpr (sizeof...(rest) > 0) {
    auto check = [&](const Device& other) {
      if (!(other == first.device))
        throw std::invalid_argument(std::string(op) + ": inputs on " + first.device.str() +
                                    " and " + other.str() + "; move them to one device first");
    };
    (check(rest.device), ...);
  }
  return first.device;
}

[[noreturn]] inline void throw_no_cuda_kernel(const char* op, const char* why) {
  throw std::runtime_error(std::string(op) + " cannot run on a CUDA device: " + why);
}

}  // namespace bareyolo::detail

// Inside a template over the element type T: run cuda::OP(args...) when `device` is a GPU.
#ifdef BAREYOLO_WITH_CUDA
#define BAREYOLO_ROUTE_TO_CUDA(OP, device, ...)                                      \
  if ((device).is_cuda()) {                                                          \
    if constexpr (std::is_same_v<T, float>) {                                        \
      return ::bareyolo::cuda::OP(__VA_ARGS__);                                      \
    } else {                                                                         \
      ::bareyolo::detail::throw_no_cuda_kernel(#OP, "CUDA kernels take float only"); \
    }                                                                                \
  }
#else
#define BAREYOLO_ROUTE_TO_CUDA(OP, device, ...) \
  if ((device).is_cuda())                       \
    ::bareyolo::detail::throw_no_cuda_kernel(#OP, "this binary was built without CUDA");
#endif

// For ops whose CUDA kernel does not exist yet.
#define BAREYOLO_REQUIRE_CPU(OP, device) \
  if ((device).is_cuda())                \
    ::bareyolo::detail::throw_no_cuda_kernel(#OP, "it has no CUDA kernel yet");
