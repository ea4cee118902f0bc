// kernels/nchw_adapter.h — how the CPU runs an op on channels-last views: through NCHW copies.
//
// Every CPU kernel reads and writes NCHW (kernels/view.h): its loops walk a channel's plane.
// Channels last is a GPU's layout (its tensor-core convolutions want it), so the CPU's job with
// it is to define what the op means, not to be fast: an op given a channels-last view on the CPU
// (kernels/route.h sends it here) runs on NCHW copies of its views, and each view it may write
// is copied back. An op's channels-last result is then its NCHW result, bit for bit, which is
// what the GPU's channels-last kernels are tested against.
//
// Every view is copied in, the ones the op only writes too (the op may add into them, or read a
// workspace it left there: the SyncBatchNorm phases), and every mutable one back. The copies
// live in per-thread buffers that only grow, so a warm training step allocates nothing here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <type_traits>
#include <vector>

#include "kernels/view.h"

namespace bareyolo::detail {

// y = x element by element at the same (n, c, pixel), whatever the two views' layouts (host
// memory; kernels/cpu/layout.cpp's copy_elements is this on the CPU).
template <class T>
void copy_elements_on_host(View<const T> x, View<T> y) {
  const int64_t pixels = x.shape.plane();
  for (int64_t i = 0; i < x.shape.n; ++i)
    for (int64_t c = 0; c < x.shape.c; ++c)
      for (int64_t p = 0; p < pixels; ++p) y.at(i, c, p) = x.at(i, c, p);
}

template <class A>
bool is_channels_last(const A&) {
  return false;
}
template <class T>
bool is_channels_last(const View<T>& v) {
  return v.channels_last();
}
template <class T>
bool is_channels_last(const std::vector<View<T>>& views) {
  for (const View<T>& v : views)
    if (v.channels_last()) return true;
  return false;
}

// Whether a call's arguments hold views: decltype(argument_types(arguments...)) names their
// types, for kTakesViews (an op without views never meets the adapter, which then need not
// compile for it).
template <class... A>
struct ArgumentTypes {};
template <class... A>
ArgumentTypes<A...> argument_types(const A&...);  // declared only: decltype's operand
template <class A>
constexpr bool kIsViewArgument = false;
template <class T>
constexpr bool kIsViewArgument<View<T>> = true;
template <class T>
constexpr bool kIsViewArgument<std::vector<View<T>>> = true;
template <class Types>
constexpr bool kTakesViews = false;
template <class... A>
constexpr bool kTakesViews<ArgumentTypes<A...>> = (kIsViewArgument<A> || ...);

// Whether any argument of a call is a channels-last view (or a list holding one).
template <class... A>
bool any_channels_last(const A&... arguments) {
  return (is_channels_last(arguments) || ...);
}

// The NCHW copies of one call's views, in buffers of the calling thread that stay for the next
// call (a stack: copies made while another call's are alive take the slots above them).
class NchwCopies {
 public:
  NchwCopies() : first_slot_(stack().depth) {}
  ~NchwCopies() { stack().depth = first_slot_; }
  NchwCopies(const NchwCopies&) = delete;
  NchwCopies& operator=(const NchwCopies&) = delete;

  // The argument as the op takes it: a channels-last view as a dense NCHW copy, a list of views
  // element by element, anything else as it is.
  template <class A>
  const A& of(const A& argument) {
    return argument;
  }
  template <class T>
  View<T> of(const View<T>& v) {
    if (!v.channels_last()) return v;
    using Element = std::remove_const_t<T>;
    Element* data = reinterpret_cast<Element*>(slot(v.shape.numel() * sizeof(Element)));
    const View<Element> copy = dense_view(data, v.shape, v.device);
    copy_elements_on_host<Element>(v, copy);
    if constexpr (!std::is_const_v<T>) write_backs_.push_back([v, copy] {
        copy_elements_on_host<Element>(copy, v);
      });
    return copy;
  }
  template <class T>
  std::vector<View<T>> of(const std::vector<View<T>>& views) {
    std::vector<View<T>> copies;
    for (const View<T>& v : views) copies.push_back(of(v));
    return copies;
  }

  // Copies what the op wrote into the NCHW copies back into the channels-last views.
  void write_back() {
    for (auto& write : write_backs_) write();
  }

 private:
  struct Stack {
    std::vector<std::vector<std::byte>> slots;
    size_t depth = 0;
  };
  static Stack& stack() {
    thread_local Stack s;
    return s;
  }
  void* slot(int64_t bytes) {
    Stack& s = stack();
    if (s.depth == s.slots.size()) s.slots.emplace_back();
    std::vector<std::byte>& buffer = s.slots[s.depth++];
    // 64 bytes beyond: the copy starts at a cache line, as Tensor's host memory does.
    if (buffer.size() < size_t(bytes) + 64) buffer.resize(size_t(bytes) + 64);
    const auto address = reinterpret_cast<uintptr_t>(buffer.data());
    return buffer.data() + ((64 - address % 64) % 64);
  }

  size_t first_slot_;
  std::vector<std::function<void()>> write_backs_;
};

// Runs op(arguments...) on NCHW copies of its channels-last views, copies back what it wrote, and
// returns what the op returned.
template <class Op, class... A>
auto through_nchw(Op&& op, const A&... arguments) {
  NchwCopies copies;
  if constexpr (std::is_void_v<decltype(op(copies.of(arguments)...))>) {
    op(copies.of(arguments)...);
    copies.write_back();
  } else {
    auto result = op(copies.of(arguments)...);
    copies.write_back();
    return result;
  }
}

}  // namespace bareyolo::detail
