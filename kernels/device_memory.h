// kernels/device_memory.h — memory on any Device, for code above kernels/: allocate, release,
// copy, zero, upload to and download from pinned host memory asynchronously, and wait for a
// device.
//
// Why this layer exists: the one dispatch rule (docs/layout.md) lets only kernels/ choose a
// device's code. A tensor, a communicator or the loader moves bytes between devices without
// knowing which devices exist: each function here routes by the Device it is given (host
// memory with the C library, a GPU's through kernels/cuda/runtime), so the same call works in
// a build without CUDA, where asking for GPU memory throws a sentence saying so.
#pragma once

#include <cstddef>

#include "kernels/cuda/runtime/runtime.h"
#include "kernels/source_location.h"
#include "kernels/view.h"

namespace bareyolo {

// True when memory on `device` is the host's own: plain pointers the CPU reads and writes. A
// GPU's memory is reached by copies only (what the communicators stage through).
bool in_host_memory(const Device& device);

// `bytes` of memory on `device` (at least one byte's worth, so that every allocation has its own
// address), from the device's caching allocator (kernels/caching_allocator.h); host memory is
// 64-byte aligned (a cache line, and the widest SIMD load). Host memory that cannot be had throws
// HostOutOfMemory naming `purpose` (e.g. "a tensor"); a GPU's throws OutOfDeviceMemory
// (device_memory_stats.h). A cache miss inside a warm training step is reported to the step
// guard at `where` (kernels/step_guard.h), as are the waits of copy_bytes and wait_for_device.
void* allocate_bytes(size_t bytes, const Device& device, const char* purpose,
                     SourceLocation where = SourceLocation::current());
// Gives back memory from allocate_bytes on the same device; nullptr is ignored.
void release_bytes(void* data, const Device& device) noexcept;

// Copies `bytes` from `src` on `src_device` to `dst` on `dst_device`; complete when it returns
// when host memory is one side of it (a copy between buffers of one GPU is only ordered, as a
// kernel is). Ordered with the GPU's other work on its compute stream (the destination's, when
// both are GPUs).
void copy_bytes(void* dst, const Device& dst_device, const void* src, const Device& src_device,
                size_t bytes, SourceLocation where = SourceLocation::current());

// Sets `bytes` bytes at `data` on `device` to zero (host memory on the CPU kernels' threads; on a
// GPU queued on its compute stream, before any later work there).
void zero_bytes(void* data, size_t bytes, const Device& device);

// A point in a device's queue of work: complete once the work queued before it has finished. A
// default-constructed one marks no work and is complete. Move-only (kernels/cuda/runtime).
using DeviceEvent = cuda::Event;

// Copies `bytes` from host memory at `host_src` to `dst` on `dst_device` without waiting: the
// returned event completes when the copy has, and `host_src` must stay as it is (and allocated)
// until then. From pinned host memory (allocate_pinned_host_bytes) a GPU copy runs truly
// asynchronously. Into host memory the copy is done on return, and the event is the empty one.
DeviceEvent upload_async(void* dst, const Device& dst_device, const void* host_src, size_t bytes);

// upload_async's mirror image: copies `bytes` from `src` on `src_device` into host memory at
// `host_dst` after the work queued on its compute stream, without waiting; the returned event
// completes when the copy has, and until then `host_dst` (pinned, for a GPU) is the copy's. From
// host memory the copy is done on return, and the event is the empty one.
DeviceEvent download_async(void* host_dst, const void* src, const Device& src_device, size_t bytes);

// An event marking the work queued on `device` so far (its compute stream's); the empty one in
// host memory, where that work is done already.
DeviceEvent mark_device_work(const Device& device);

// upload_async beside the compute stream: a GPU copies on its copy stream (runtime.h's
// upload_beside_compute), so the copy overlaps the work queued before it; it starts once
// `dst_free` (mark_device_work after the last work using `dst`) completes, and the work queued
// after the call waits for it. Into host memory a plain copy, done on return.
DeviceEvent upload_beside_compute(void* dst, const Device& dst_device, const void* host_src,
                                  size_t bytes, const DeviceEvent& dst_free);

// The host waits until the work queued on `device` has finished (at once on the CPU, whose
// kernels return done).
void wait_for_device(const Device& device, SourceLocation where = SourceLocation::current());

// Page-locked host memory, for buffers a GPU reads with upload_async: worth it only where a GPU
// is usable (usable_gpu_count(), devices.h); without one allocate_pinned_host_bytes throws.
void* allocate_pinned_host_bytes(size_t bytes);
void release_pinned_host_bytes(void* data) noexcept;

}  // namespace bareyolo
