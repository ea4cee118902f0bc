// kernels/op_sequence.h — the ops a stretch of code issues, written down as the kernels see them:
// each op's name and its arguments (a view's element type, address, shape and image stride; a
// pointer's address; a number's exact value; a parameter struct's bytes; what a type outside
// kernels/ says of itself through a describe_argument found beside it).
//
// Why: a CUDA graph captured from one training step replays that step's kernels on the same
// memory with the same arguments. Replaying it for the next step is right only if the next step
// would have issued exactly that sequence: the same ops, shapes and buffers, and every number that
// changes from step to step (a learning rate, the EMA's decay, Adam's step) read from a slot in
// device memory rather than passed by value. Two steps that record the same sequence here are
// such steps; the CPU records the ops through the same routing as a GPU (kernels/route.h), so a
// test on the CPU shows what a capture needs ("op sequence ..." tests, tests/unit/op_sequence.cpp).
//
// Off unless a Recording is alive: an op then costs one relaxed atomic load.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "kernels/view.h"

namespace bareyolo::op_sequence {

// One op as recorded: its name and its arguments, one text each.
struct Call {
  std::string op;
  std::vector<std::string> arguments;
  bool operator==(const Call&) const = default;
  std::string str() const;  // "op(argument, argument, ...)"
};

// Records every op issued, on any thread, while it lives; one at a time. Besides the ops of
// kernels/route.h: the device memory calls (kernels/device_memory.h: "allocate", "copy", "zero",
// the uploads) and whatever a caller marks with note(name) alone (the Solver's "step begins").
class Recording {
 public:
  Recording();
  ~Recording();
  Recording(const Recording&) = delete;
  Recording& operator=(const Recording&) = delete;
  // The calls recorded so far, in issue order; clears them.
  std::vector<Call> take();
};

namespace detail {
extern std::atomic<bool> g_recording;
void append(Call call);
std::string address(const void* pointer);
}  // namespace detail

// Whether a Recording lives (one relaxed atomic load): for a caller whose description costs
// something to make (an upload's bytes).
inline bool recording() { return detail::g_recording.load(std::memory_order_relaxed); }

// `bytes` bytes at `data` as hexadecimal digits: exact, for values whose every bit counts.
std::string hex(const void* data, size_t bytes);

// How an argument is recorded; a describe_argument for a type outside kernels/ may build on it.
template <class T>
std::string describe(const T& argument);

namespace detail {
template <class T>
std::string describe_view(const View<T>& view) {
  // By size: the views' element types are u8, bf16, float and double.
  const char* type = sizeof(T) == 1   ? "u8"
                     : sizeof(T) == 2 ? "bf16"
                     : sizeof(T) == 4 ? "f32"
                                      : "f64";
  return std::string(type) + " view " + address(view.data) + " " + view.shape.str() + " stride " +
         std::to_string(view.batch_stride) +
         (view.channels_last() ? " pixel stride " + std::to_string(view.pixel_stride) : "");
}
}  // namespace detail

template <class T>
std::string describe(const T& argument) {
  if constexpr (requires { describe_argument(argument); }) {
    return describe_argument(argument);  // a type outside kernels/ says what identifies it
  } else if constexpr (requires { detail::describe_view(argument); }) {
    return detail::describe_view(argument);
  } else if constexpr (std::is_pointer_v<T>) {
    return detail::address(argument);
  } else if constexpr (std::is_same_v<T, bool>) {
    return argument ? "true" : "false";
  } else if constexpr (std::is_integral_v<T>) {
    return std::to_string(argument);
  } else if constexpr (std::is_floating_point_v<T>) {
    return "value " + hex(&argument, sizeof argument);  // exact: any change is one
  } else if constexpr (std::is_same_v<T, Device>) {
    return argument.str();
  } else if constexpr (std::is_convertible_v<const T&, std::string_view>) {
    return std::string(argument);  // already a description (an upload's bytes)
  } else if constexpr (requires {
                         argument.begin();
                         argument.end();
                       }) {
    // A list (the views of a Concat, a span of settings): every element.
    std::string text = "[";
    for (const auto& element : argument) text += (text.size() > 1 ? ", " : "") + describe(element);
    return text + "]";
  } else {
    // A struct of settings, by its bytes: one without padding (else say how to describe it with
    // a describe_argument beside it, as models/loss/loss.h does).
    static_assert(std::is_trivially_copyable_v<T>, "say how to record this argument");
    return "bytes " + hex(&argument, sizeof argument);
  }
}

// Records op `op` called with `arguments`, while a Recording lives.
template <class... Arguments>
void note(const char* op, const Arguments&... arguments) {
  if (!recording()) return;
  detail::append({op, {describe(arguments)...}});
}

}  // namespace bareyolo::op_sequence
