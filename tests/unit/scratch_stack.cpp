// tests/unit/scratch_stack.cpp — kernels/scratch_stack.h: the same sequence of frames takes the
// same memory, call after call (what a warm step and a recorded CUDA graph rely on); nested
// frames take their own slots; a slot grows by half again at least; one frame, one device.
#include "kernels/scratch_stack.h"

#include <cstdint>
#include <new>
#include <stdexcept>
#include <thread>

#include "tests/support/testing.h"

using namespace bareyolo;
using bareyolo::detail::ScratchFrame;

namespace {

struct Taken {
  void *outer, *inner, *after;
};

// An op's frame with an op inside it, then a second slot of the outer frame.
Taken one_call(int64_t bytes) {
  ScratchFrame outer;
  Taken t{outer.take(bytes, Device::cpu()), nullptr, nullptr};
  {
    ScratchFrame inner;
    t.inner = inner.take(bytes, Device::cpu());
  }
  t.after = outer.take(bytes, Device::cpu());
  return t;
}

}  // namespace

TEST_CASE("scratch stack: a repeated call takes the same slots, nested frames their own") {
  const Taken first = one_call(1000), second = one_call(1000);
  CHECK(first.outer != first.inner);
  CHECK(first.after == first.inner);  // the inner frame's slot was given back when it ended
  CHECK(second.outer == first.outer);
  CHECK(second.inner == first.inner);
  // Asking less keeps the slot; asking more than half again grows it to what is asked.
  const Taken smaller = one_call(10);
  CHECK(smaller.outer == first.outer);
  const Taken larger = one_call(1 << 20);
  ScratchFrame frame;
  auto* bytes = static_cast<uint8_t*>(frame.take(1 << 20, Device::cpu()));
  bytes[(1 << 20) - 1] = 7;  // the whole request is there (ASan would catch less)
  CHECK(bytes == larger.outer);
  CHECK(frame.view<float>({2, 3, 4, 5}, Device::cpu(), true).pixel_stride == 3);
  CHECK(frame.view<float>({2, 1, 4, 5}, Device::cpu(), true).pixel_stride == 1);  // coincide
}

TEST_CASE("scratch stack: a slot grows by half again at least, so a few rises move it once") {
  void *first = nullptr, *grown = nullptr, *again = nullptr;  // what the thread took
  std::thread([&] {                                           // a thread of its own: a fresh stack
    auto take = [](int64_t bytes) {
      ScratchFrame frame;
      return frame.take(bytes, Device::cpu());
    };
    first = take(1000);
    grown = take(1200);                      // beyond 1000: grown to 1500
    static_cast<uint8_t*>(grown)[1499] = 7;  // there (ASan, which runs this suite, would say)
    again = take(1500);                      // fits
  })
      .join();
  CHECK(first != nullptr);
  CHECK(again == grown);
}

// AutoBatch probes batch sizes until an allocation fails, then trains on: a slot whose growth
// failed must be empty, not hold the buffer it gave back.
TEST_CASE("scratch stack: a failed growth leaves the slot empty and usable") {
  void *before = nullptr, *after = nullptr, *grown = nullptr;
  bool threw = false;
  std::thread([&] {
    auto take = [](int64_t bytes) {
      ScratchFrame frame;
      return frame.take(bytes, Device::cpu());
    };
    before = take(1000);
    try {
      take(int64_t(1) << 47);          // 128 TiB: no host has it
    } catch (const std::bad_alloc&) {  // HostOutOfMemory
      threw = true;
    }
    after = take(1000);  // a new buffer: the old one went back when the slot grew
    static_cast<uint8_t*>(after)[999] = 7;
    grown = take(4000);  // and the slot grows again, giving `after` back once
  }).join();
  CHECK(threw);
  CHECK(before != nullptr);
  CHECK(after != nullptr);
  CHECK(grown != nullptr);
}

TEST_CASE("scratch stack: one frame takes one device's memory") {
  ScratchFrame frame;
  frame.take(64, Device::cpu());
  CHECK_THROWS_WITH_AS(frame.take(64, Device::cuda(0)),
                       doctest::Contains("take each device's in a frame of its own"),
                       std::logic_error);
}
