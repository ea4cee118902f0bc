// kernels/nchw_adapter.h — how an op whose kernel reads NCHW runs on channels-last views:
// through NCHW copies.
//
// Every CPU kernel reads and writes NCHW (kernels/view.h): its loops walk a channel's plane; so
// do most CUDA kernels so far. An op given a channels-last view whose kernel does not take that
// layout (kernels/route.h sends it here) runs on NCHW copies of its views, made on their device,
// and each view it may write is copied back. Its channels-last result is then its NCHW result,
// bit for bit: on the CPU that defines what the op means in channels last (the tests' reference
// for a GPU's channels-last kernels); on a GPU it makes every op run in channels last, at the
// cost of the copies, until the op's own kernel takes it.
//
// Every view is copied in, the ones the op only writes too (the op may add into them, or read a
// workspace it left there: the SyncBatchNorm phases), and every mutable one back. The copies
// live in per-thread buffers that only grow, so a warm training step allocates nothing here, and
// a CUDA graph recorded from a step reads the same buffers at every replay (a GPU's buffers are
// never given back: see Stack).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/bf16.h"
#include "kernels/device_memory.h"
#include "kernels/ops.h"
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

// y = x at every (n, c, pixel) on the views' device: the loop above in host memory, the
// copy_elements op's kernel on a GPU (float and bf16, the GPU's activation types).
template <class T>
void copy_elements_on_device(View<const T> x, View<T> y) {
  if (in_host_memory(x.device)) return copy_elements_on_host(x, y);
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, bf16>)
    ops::copy_elements<T>(x, y);
  else
    throw std::invalid_argument("a channels-last view of " + std::to_string(sizeof(T)) +
                                "-byte elements on " + x.device.str() +
                                ": only float and bf16 views change layout there");
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
    Element* data = static_cast<Element*>(slot(v.shape.numel() * sizeof(Element), v.device));
    const View<Element> copy = dense_view(data, v.shape, v.device);
    copy_elements_on_device<Element>(v, copy);
    if constexpr (!std::is_const_v<T>)
      write_backs_.push_back([v, copy] { copy_elements_on_device<Element>(copy, v); });
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
  // A buffer of one device, grown by replacing it (allocate_bytes: 64-byte aligned on the host).
  struct Slot {
    void* data = nullptr;
    size_t bytes = 0;
    Device device;
  };
  // A GPU's buffers are never given back: a CUDA graph recorded from a step addresses them at
  // every replay, so a slot that grows keeps its old buffer too (a few growths, at a new input
  // size's first steps), and all are left to the process's end, whose teardown frees device
  // memory (the CUDA runtime may be gone before a thread's destructors run). The host's are
  // given back when they grow or the thread ends.
  struct Stack {
    std::vector<Slot> slots;
    std::vector<Slot> outgrown;  // a GPU's, kept
    size_t depth = 0;
    ~Stack() {
      for (Slot& s : slots)
        if (in_host_memory(s.device)) release_bytes(s.data, s.device);
    }
  };
  static Stack& stack() {
    thread_local Stack s;
    return s;
  }
  void* slot(int64_t bytes, const Device& device) {
    Stack& s = stack();
    if (s.depth == s.slots.size()) s.slots.emplace_back();
    Slot& slot = s.slots[s.depth++];
    if (slot.bytes < size_t(bytes) || !(slot.device == device)) {
      if (in_host_memory(slot.device))
        release_bytes(slot.data, slot.device);
      else
        s.outgrown.push_back(slot);
      slot = {allocate_bytes(size_t(bytes), device, "a channels-last op's NCHW copy"),
              size_t(bytes), device};
    }
    return slot.data;
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
