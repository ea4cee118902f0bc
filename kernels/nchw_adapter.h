// kernels/nchw_adapter.h — how an op whose kernel reads NCHW runs on channels-last views:
// through NCHW copies.
//
// Every CPU kernel reads and writes NCHW (kernels/view.h): its loops walk a channel's plane. An
// op given a channels-last view whose kernel on that device does not take that layout
// (kernels/route.h sends it here: every CPU op but copy_elements, a CUDA op not listed in
// kOpsTakingChannelsLastOnCuda) runs on NCHW copies of its views, made on their device, and each
// view it may write is copied back. Its channels-last result is then its NCHW result, bit for
// bit: on the CPU that defines what the op means in channels last (the tests' reference for a
// GPU's channels-last kernels); on a GPU it lets an op without such a kernel run, at the cost of
// the copies (nchw_copies_made counts them).
//
// Every view is copied in, the ones the op only writes too (the op may add into them, or read a
// workspace it left there: the SyncBatchNorm phases), and every mutable one back. The copies
// live in the thread's scratch stack (kernels/scratch_stack.h), so a warm training step
// allocates nothing here, and a CUDA graph recorded from a step reads the same buffers at every
// replay.
//
// The same copies in packed channels last serve a GPU convolution given views cuDNN may not take
// as they are (a channel slice of a channels-last Concat, or views of both layouts in one call:
// kernels/cuda/conv2d.cu).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/bf16.h"
#include "kernels/device_memory.h"
#include "kernels/ops.h"
#include "kernels/scratch_stack.h"
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

// The layout a call's copies are made in: NCHW (what every CPU kernel reads), or channels last
// packed (no gaps between pixels or images: what cuDNN's channels-last convolutions are given).
enum class CopyLayout { nchw, packed_channels_last };

// Whether view v is taken as it is by a kernel that reads `layout`: an NCHW view (a channel
// slice too) for NCHW; for packed channels last, a packed view that is channels last or whose
// two layouts coincide (one channel, or one pixel).
template <class T>
bool taken_as_is(const View<T>& v, CopyLayout layout) {
  if (layout == CopyLayout::nchw) return !v.channels_last();
  return v.packed() && (v.channels_last() || v.shape.layouts_coincide());
}

// How many views this process has copied, by the layout of the copies: NCHW ones for an op whose
// kernel on that device does not take channels last (a GPU step copies none:
// tests/cuda/channels_last.cpp); packed channels-last ones for a GPU convolution given a
// Concat's channel slice (kernels/cuda/conv2d.cu).
inline std::atomic<uint64_t> nchw_copies_made{0}, packed_copies_made{0};

// The copies of one call's views in one layout, in scratch buffers of the calling thread that
// stay for the next call (kernels/scratch_stack.h).
class LayoutCopies {
 public:
  explicit LayoutCopies(CopyLayout layout) : layout_(layout) {}

  // The argument as the op takes it: a view not taken as it is as a copy in the layout, a list
  // of views element by element, anything else as it is.
  template <class A>
  const A& of(const A& argument) {
    return argument;
  }
  template <class T>
  View<T> of(const View<T>& v) {
    if (taken_as_is(v, layout_)) return v;
    using Element = std::remove_const_t<T>;
    (layout_ == CopyLayout::nchw ? nchw_copies_made : packed_copies_made)
        .fetch_add(1, std::memory_order_relaxed);
    const View<Element> copy =
        scratch_.view<Element>(v.shape, v.device, layout_ == CopyLayout::packed_channels_last);
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

  // Copies what the op wrote into the copies back into the views it was given.
  void write_back() {
    for (auto& write : write_backs_) write();
  }

 private:
  CopyLayout layout_;
  ScratchFrame scratch_;
  std::vector<std::function<void()>> write_backs_;
};

// Runs op(arguments...) on copies in `layout` of the views not taken as they are, copies back
// what it wrote, and returns what the op returned.
template <class Op, class... A>
auto through_layout(CopyLayout layout, Op&& op, const A&... arguments) {
  LayoutCopies copies(layout);
  if constexpr (std::is_void_v<decltype(op(copies.of(arguments)...))>) {
    op(copies.of(arguments)...);
    copies.write_back();
  } else {
    auto result = op(copies.of(arguments)...);
    copies.write_back();
    return result;
  }
}

// Runs op(arguments...) on NCHW copies of its channels-last views (the adapter of route.h).
template <class Op, class... A>
auto through_nchw(Op&& op, const A&... arguments) {
  return through_layout(CopyLayout::nchw, std::forward<Op>(op), arguments...);
}

}  // namespace bareyolo::detail
