// engine/step_scalars.h — the numbers an optimizer step reads that change from step to step (each
// parameter group's learning rate and momentum, Adam's bias corrections, the EMA's decay), kept in
// one small block of the parameters' device memory that the kernels read them from.
//
// Why: passed by value, such a number becomes part of the launch, and a CUDA graph captured from
// one step would replay every later step with the captured step's learning rate. Read from this
// block, a replay uses whatever the block holds. So the host writes each number into the block's
// host copy (set), and one copy that the host does not wait for (kernels/staged_copies.h) takes
// the whole block to the device when it changed: the Solver's, before a step's kernels are issued
// (upload), or else the first kernel's that asks for a slot's device address (at). On the CPU
// the "device" block is host memory and the copy a memcpy, so CPU runs test the same protocol.
//
//   StepScalars block(device);
//   StepScalars::Slot decay = block.reserve<EmaFactors<float>>(1);   at construction
//   block.set(decay, std::span{&factors, 1});                       each step, on the host
//   ops::ema_update(average, value, block.at<EmaFactors<float>>(decay));   the kernel reads it
#pragma once

#include <array>
#include <cstddef>
#include <span>
#include <type_traits>
#include <vector>

#include "engine/tensor.h"

namespace bareyolo {

class StepScalars {
 public:
  static constexpr size_t kBytes = 1024;  // room for every optimizer's slots with the EMA's

  // `bytes` bytes at `offset` into the block: a slot's values of one type.
  struct Slot {
    size_t offset = 0, bytes = 0;
  };

  explicit StepScalars(Device device);
  StepScalars(const StepScalars&) = delete;
  StepScalars& operator=(const StepScalars&) = delete;

  // A new slot for `count` values of T, aligned to 16 bytes; throws past kBytes.
  template <class T>
  Slot reserve(size_t count) {
    static_assert(std::is_trivially_copyable_v<T> && alignof(T) <= 16);
    return reserve_bytes(sizeof(T) * count);
  }
  // Writes `values` (as many as the slot holds) into the host copy; the block is marked changed
  // only when a byte differs, so writing the same numbers again costs no copy.
  template <class T>
  void set(Slot slot, std::span<const T> values) {
    set_bytes(slot, values.data(), sizeof(T) * values.size());
  }
  // The slot's values on the device, for a kernel to read; uploads the block first if changed.
  template <class T>
  const T* at(Slot slot) {
    return reinterpret_cast<const T*>(device_bytes(slot));
  }
  // For a one-off call of an update op (a test, a benchmark): a new slot holding Factors::of of
  // each of `settings`, on the device.
  template <class Factors, class Settings>
  const Factors* place(const Settings& settings) {
    std::vector<Factors> factors;
    for (const auto& s : settings) factors.push_back(Factors::of(s));
    const Slot slot = reserve<Factors>(factors.size());
    set(slot, std::span<const Factors>(factors));
    return at<Factors>(slot);
  }
  // The block to the device if it changed since its last upload: one copy, not waited for.
  void upload();
  // Uploads so far (a test's check that a step takes at most one).
  int64_t uploads() const { return uploads_; }

 private:
  Slot reserve_bytes(size_t bytes);
  void set_bytes(Slot slot, const void* data, size_t bytes);
  const std::byte* device_bytes(Slot slot);

  Tensor block_;  // kBytes on the device
  alignas(16) std::array<std::byte, kBytes> host_{};
  size_t reserved_ = 0;
  bool changed_ = true;  // the device block has not been written yet
  int64_t uploads_ = 0;
};

}  // namespace bareyolo
