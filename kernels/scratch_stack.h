// kernels/scratch_stack.h — per-thread scratch memory for one op call on any device, in buffers
// that stay for the next call: a warm training step allocates none, and a CUDA graph recorded
// from a step finds the same buffers at every replay.
//
// A ScratchFrame lives for one call; each take() hands out the next slot of the calling thread's
// stack for that device, grown to the bytes asked for. Frames nest (an op that runs another op
// inside it: the NCHW adapter, a GPU convolution copying its weight), the inner one taking the
// slots above the outer one's, and give their slots back when they end. So the same sequence of
// calls takes the same slots at the same addresses, step after step.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "kernels/device_memory.h"
#include "kernels/view.h"

namespace bareyolo::detail {

class ScratchFrame {
 public:
  ScratchFrame() = default;
  ~ScratchFrame() {
    if (stack_) stack_->depth = first_slot_;
  }
  ScratchFrame(const ScratchFrame&) = delete;
  ScratchFrame& operator=(const ScratchFrame&) = delete;

  // At least `bytes` of memory on `device` (64-byte aligned on the host, 256 on a GPU; one
  // device per frame, as an op's views are on one device), this frame's until it ends; what it
  // holds is left from an earlier call (or undefined). A slot too small grows by half again at
  // least (a few growths while a step's shapes rise), and its old buffer goes back, stream-ordered
  // on a GPU; gpu_moves() counts those, for whoever replays recorded CUDA graphs (which read the
  // old address) to record them again.
  void* take(int64_t bytes, const Device& device) {
    Stack& s = enter(device);
    if (s.depth == s.slots.size()) s.slots.emplace_back();
    Slot& slot = s.slots[s.depth++];
    if (slot.bytes < size_t(bytes)) {
      // Emptied before anything can throw: a failed allocation (AutoBatch's probe catches one)
      // leaves an empty slot, never a freed buffer.
      void* old = std::exchange(slot.data, nullptr);
      const size_t grown = std::max(size_t(bytes), std::exchange(slot.bytes, 0) * 3 / 2);
      release_bytes(old, device);
      if (old && !in_host_memory(device)) gpu_moves_.fetch_add(1, std::memory_order_relaxed);
      void* fresh = nullptr;
      size_t fresh_bytes = grown;
      try {
        fresh = allocate_bytes(grown, device, "an op's scratch");
      } catch (const std::exception&) {
        if (grown == size_t(bytes)) throw;
        fresh_bytes = size_t(bytes);  // the margin does not fit: the size asked for may
        fresh = allocate_bytes(fresh_bytes, device, "an op's scratch");
      }
      slot = {fresh, fresh_bytes};
    }
    return slot.data;
  }

  // A dense view of `shape` in scratch memory, laid out NCHW or, with `channels_last`, NHWC.
  template <class T>
  View<T> view(const Shape4& shape, const Device& device, bool channels_last = false) {
    T* data = static_cast<T*>(take(shape.numel() * int64_t(sizeof(T)), device));
    View<T> v = dense_view(data, shape, device);
    if (channels_last && !shape.layouts_coincide()) v.pixel_stride = shape.c;
    return v;
  }

  // How many GPU scratch buffers every thread has replaced so far.
  static uint64_t gpu_moves() { return gpu_moves_.load(std::memory_order_relaxed); }

 private:
  struct Slot {
    void* data = nullptr;
    size_t bytes = 0;
  };
  // One device's slots for the calling thread. A GPU's are left to the process's end, whose
  // teardown frees device memory (the CUDA runtime may be gone before a thread's destructors
  // run); the host's are given back when the thread ends.
  struct Stack {
    Device device;
    std::vector<Slot> slots;
    size_t depth = 0;
    explicit Stack(Device d) : device(d) {}
    ~Stack() {
      if (in_host_memory(device))
        for (Slot& s : slots) release_bytes(s.data, device);
    }
  };
  static Stack& stack_of(const Device& device) {
    thread_local std::vector<std::unique_ptr<Stack>> stacks;  // one per device the thread used
    for (const std::unique_ptr<Stack>& s : stacks)
      if (s->device == device) return *s;
    return *stacks.emplace_back(std::make_unique<Stack>(device));
  }
  // The frame's stack: at its first take, `device`'s, whose depth it restores at the end.
  Stack& enter(const Device& device) {
    if (!stack_) {
      stack_ = &stack_of(device);
      first_slot_ = stack_->depth;
    } else if (!(stack_->device == device)) {
      throw std::logic_error("ScratchFrame: scratch on " + device.str() + " in a frame on " +
                             stack_->device.str() + "; take each device's in a frame of its own");
    }
    return *stack_;
  }

  inline static std::atomic<uint64_t> gpu_moves_{0};
  Stack* stack_ = nullptr;
  size_t first_slot_ = 0;
};

}  // namespace bareyolo::detail
