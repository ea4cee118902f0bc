// kernels/route.h — how an op defined in kernels/cpu/ hands a call to its CUDA kernel.
//
// The CPU implementation of each op in kernels/ops.h is the op's definition (it is the
// reference everything else is tested against). Its first statement routes the call:
// views on a GPU go to the op's CUDA kernel (float, and bf16 for the activation ops;
// kernels/cuda/cuda_ops.h), views in host memory fall through to the CPU code below it. An op
// without a CUDA kernel yet says so.
//
// A call given a channels-last view runs on NCHW copies of its views (kernels/nchw_adapter.h),
// on their device, unless the op's kernel on that device takes channels last
// (kOpsTakingChannelsLast, kOpsTakingChannelsLastOnCuda): every CPU kernel but copy_elements, and
// every CUDA kernel not listed, sees NCHW only.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>

#include "kernels/nchw_adapter.h"
#include "kernels/op_profile.h"
#include "kernels/op_sequence.h"
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

// Every macro below first notes the call in the op sequence being recorded, if any
// (kernels/op_sequence.h), on either device, and ends by opening the op's profile timer
// (kernels/op_profile.h): what follows it in the op is the CPU path, timed under the op's name
// while profiling is on.
#define BAREYOLO_PROFILE_CPU_OP(OP) const ::bareyolo::op_profile::Timer bareyolo_op_timer(#OP)

// A call with a channels-last view, where OP's kernel on `device` does not take it: OP(args...)
// again, on NCHW copies. CALL is how the op names itself (OP<T> in a template).
#define BAREYOLO_CHANNELS_LAST_THROUGH_NCHW(OP, CALL, device, ...)                                \
  if constexpr (!::bareyolo::ops::takes_channels_last_everywhere(#OP) &&                          \
                ::bareyolo::detail::kTakesViews<decltype(::bareyolo::detail::argument_types(      \
                    __VA_ARGS__))>) {                                                             \
    if (::bareyolo::detail::any_channels_last(__VA_ARGS__) &&                                     \
        !::bareyolo::ops::takes_channels_last(#OP, device))                                       \
      return ::bareyolo::detail::through_nchw([](auto... a) { return CALL(a...); }, __VA_ARGS__); \
  }

// Inside a template over the element type T: run cuda::OP(args...) when `device` is a GPU.
#ifdef BAREYOLO_WITH_CUDA
#define BAREYOLO_ROUTE_TO_CUDA(OP, device, ...)                                      \
  BAREYOLO_CHANNELS_LAST_THROUGH_NCHW(OP, OP<T>, device, __VA_ARGS__)                \
  ::bareyolo::op_sequence::note(#OP, __VA_ARGS__);                                   \
  if ((device).is_cuda()) {                                                          \
    if constexpr (std::is_same_v<T, float>) {                                        \
      return ::bareyolo::cuda::OP(__VA_ARGS__);                                      \
    } else {                                                                         \
      ::bareyolo::detail::throw_no_cuda_kernel(#OP, "CUDA kernels take float only"); \
    }                                                                                \
  }                                                                                  \
  BAREYOLO_PROFILE_CPU_OP(OP)
#else
#define BAREYOLO_ROUTE_TO_CUDA(OP, device, ...)                                          \
  BAREYOLO_CHANNELS_LAST_THROUGH_NCHW(OP, OP<T>, device, __VA_ARGS__)                    \
  ::bareyolo::op_sequence::note(#OP, __VA_ARGS__);                                       \
  if ((device).is_cuda())                                                                \
    ::bareyolo::detail::throw_no_cuda_kernel(#OP, "this binary was built without CUDA"); \
  BAREYOLO_PROFILE_CPU_OP(OP)
#endif

namespace bareyolo::ops {

constexpr bool listed_in(std::string_view op, const auto& list) {
  for (std::string_view listed : list)
    if (listed == op) return true;
  return false;
}

// The ops whose CUDA kernel does not exist yet: their CPU implementation starts with
// BAREYOLO_REQUIRE_CPU, which checks at compile time that they are listed here. (On a GPU the
// graph's Concat costs nothing: producers write into their slice, so concat_* never run there.)
inline constexpr std::string_view kOpsWithoutCudaKernel[] = {"concat_forward", "concat_backward"};

constexpr bool has_no_cuda_kernel(std::string_view op) {
  return listed_in(op, kOpsWithoutCudaKernel);
}

// The ops whose kernels take channels-last views as they are, on every device; any other op runs
// on NCHW copies of a channels-last call's views (kernels/nchw_adapter.h) where its kernel on the
// call's device is not listed below.
inline constexpr std::string_view kOpsTakingChannelsLast[] = {"copy_elements"};

// The ops whose CUDA kernels take views of either layout, in any mix, as they are (the CPU's
// kernels of these ops still see NCHW copies: the CPU is the reference, not the fast path).
inline constexpr std::string_view kOpsTakingChannelsLastOnCuda[] = {
    "conv2d_forward",
    "conv2d_backward_data",
    "conv2d_backward_weight",
    "batchnorm_moments",
    "batchnorm_apply",
    "batchnorm_backward_reduce",
    "batchnorm_backward_apply",
    "batchnorm_train_statistics",
    "batchnorm_forward_train",
    "batchnorm_backward_train",
    "batchnorm_forward_eval",
    "batchnorm_backward_eval",
    "batchnorm_silu_apply",
    "batchnorm_silu_backward_reduce",
    "batchnorm_silu_backward_apply",
    "batchnorm_silu_backward_train",
    "batchnorm_silu_backward_eval",
    "silu_forward",
    "silu_backward",
    "add_forward",
    "add_backward",
    "upsample_nearest2x_forward",
    "upsample_nearest2x_backward",
    "maxpool2d_forward",
    "maxpool2d_chain3_forward",
    "maxpool2d_backward",
    "convert_to_bf16",
    "convert_from_bf16",
    "round_to_bf16_in_place",
};

constexpr bool takes_channels_last_everywhere(std::string_view op) {
  return listed_in(op, kOpsTakingChannelsLast);
}

// Whether `op`'s kernel on `device` takes channels-last views as they are.
inline bool takes_channels_last(std::string_view op, const Device& device) {
  return takes_channels_last_everywhere(op) ||
         (device.is_cuda() && listed_in(op, kOpsTakingChannelsLastOnCuda));
}

#ifdef BAREYOLO_WITH_CUDA
inline constexpr bool kCudaKernelsCompiled = true;
#else
inline constexpr bool kCudaKernelsCompiled = false;
#endif

// Whether `op` can run on `device` in this binary.
inline bool has_kernel(std::string_view op, const Device& device) {
  return device.is_cpu() || (kCudaKernelsCompiled && !has_no_cuda_kernel(op));
}

// Before a run starts: throws naming the op, the device and `what` needs it (e.g.
// "--freeze") when the op cannot run there, instead of failing at its first call.
inline void require_kernel(std::string_view op, const Device& device, const std::string& what) {
  if (has_kernel(op, device)) return;
  throw std::invalid_argument(what + " runs " + std::string(op) + ", which has no kernel for " +
                              device.str() + " in this binary" +
                              (device.is_cuda() ? " (CPU only)" : "") +
                              "; choose another option or train on the CPU");
}

}  // namespace bareyolo::ops

// For an op that is not a template over the element type (it takes float), outside kernels/
// too (the detection ops in models/), and for an op's bf16 form (its explicit specialisation):
// run cuda::OP(args...) when `device` is a GPU.
#ifdef BAREYOLO_WITH_CUDA
#define BAREYOLO_ROUTE_FLOAT_OP_TO_CUDA(OP, device, ...)            \
  BAREYOLO_CHANNELS_LAST_THROUGH_NCHW(OP, OP, device, __VA_ARGS__)  \
  ::bareyolo::op_sequence::note(#OP, __VA_ARGS__);                  \
  if ((device).is_cuda()) return ::bareyolo::cuda::OP(__VA_ARGS__); \
  BAREYOLO_PROFILE_CPU_OP(OP)
#else
#define BAREYOLO_ROUTE_FLOAT_OP_TO_CUDA(OP, device, ...)                                 \
  BAREYOLO_CHANNELS_LAST_THROUGH_NCHW(OP, OP, device, __VA_ARGS__)                       \
  ::bareyolo::op_sequence::note(#OP, __VA_ARGS__);                                       \
  if ((device).is_cuda())                                                                \
    ::bareyolo::detail::throw_no_cuda_kernel(#OP, "this binary was built without CUDA"); \
  BAREYOLO_PROFILE_CPU_OP(OP)
#endif

// For ops whose CUDA kernel does not exist yet (listed in kOpsWithoutCudaKernel).
#define BAREYOLO_REQUIRE_CPU(OP, device, ...)                                      \
  static_assert(::bareyolo::ops::has_no_cuda_kernel(#OP),                          \
                #OP " must be listed in kOpsWithoutCudaKernel (kernels/route.h)"); \
  BAREYOLO_CHANNELS_LAST_THROUGH_NCHW(OP, OP, device, __VA_ARGS__)                 \
  ::bareyolo::op_sequence::note(#OP, __VA_ARGS__);                                 \
  if ((device).is_cuda())                                                          \
    ::bareyolo::detail::throw_no_cuda_kernel(#OP, "it has no CUDA kernel yet");    \
  BAREYOLO_PROFILE_CPU_OP(OP)
