// kernels/scratch_stack.h — per-thread scratch memory for one op call on any device, in buffers
// that stay for the next call: a warm training step allocates none, and a CUDA graph recorded
// from a step finds the same buffers at every replay.
//
// A ScratchFrame lives for one call; each take() hands out the next slot of the calling thread's
// stack, grown to the bytes asked for. Frames nest (an op that runs another op inside it: the
// NCHW adapter, a GPU convolution copying its weight), the inner one taking the slots above the
// outer one's, and give their slots back when they end. So the same sequence of calls takes the
// same slots at the same addresses, step after step.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/device_memory.h"
#include "kernels/view.h"

namespace bareyolo::detail {

class ScratchFrame {
 public:
  ScratchFrame() : first_slot_(stack().depth) {}
  ~ScratchFrame() { stack().depth = first_slot_; }
  ScratchFrame(const ScratchFrame&) = delete;
  ScratchFrame& operator=(const ScratchFrame&) = delete;

  // At least `bytes` of memory on `device` (64-byte aligned on the host, 256 on a GPU), this
  // frame's until it ends; what it holds is left from an earlier call (or undefined).
  void* take(int64_t bytes, const Device& device) {
    Stack& s = stack();
    if (s.depth == s.slots.size()) s.slots.emplace_back();
    Slot& slot = s.slots[s.depth++];
    if (slot.bytes < size_t(bytes) || !(slot.device == device)) {
      if (in_host_memory(slot.device))
        release_bytes(slot.data, slot.device);
      else
        s.outgrown.push_back(slot);
      slot = {allocate_bytes(size_t(bytes), device, "an op's scratch"), size_t(bytes), device};
    }
    return slot.data;
  }

  // A dense view of `shape` in scratch memory, laid out NCHW or, with `channels_last`, NHWC.
  template <class T>
  View<T> view(const Shape4& shape, const Device& device, bool channels_last = false) {
    T* data = static_cast<T*>(take(shape.numel() * int64_t(sizeof(T)), device));
    View<T> v = dense_view(data, shape, device);
    if (channels_last && shape.c > 1 && shape.plane() > 1) v.pixel_stride = shape.c;
    return v;
  }

 private:
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

  size_t first_slot_;
};

}  // namespace bareyolo::detail
