// kernels/staged_copies.h — host-to-device copies that the host never waits for: numbers built on
// the host each step while the device may still be running the previous one (the loss's counts
// and matched rows, the step's scalars: engine/step_scalars.h).
//
// A GPU copies asynchronously only from page-locked memory, which must stay as it is until the
// copy has run. So the bytes are first copied into a pinned staging buffer, and the copy's
// event is kept with it: a buffer is written again only once its event has completed, and when
// every kept buffer is still being read a new one is pinned (the queue of a GPU holds a few steps
// at most, so a few buffers are all it ever takes). Into host memory (the CPU) the copy is a plain
// memcpy.
#pragma once

#include <cstddef>

#include "kernels/view.h"

namespace bareyolo {

// Copies `bytes` bytes from host memory at `src` to `dst` on `device`, ordered with the work queued
// on its compute stream; the host does not wait, and `src` may change as soon as this returns.
void upload_without_waiting(void* dst, const Device& device, const void* src, size_t bytes);

}  // namespace bareyolo
