// kernels/device_memory_stats.h — how much memory a GPU has and how much of it this process's
// caching allocator holds, for the code that sizes work to fit (AutoBatch's probe).
//
// Part of the dispatch layer (device_memory.h says why it exists): code above kernels/ reads a
// device's memory through these instead of the CUDA runtime. The host's memory is not
// accounted for: asked about the CPU, each throws std::invalid_argument.
#pragma once

#include <cstddef>

#include "kernels/cuda/runtime/allocator.h"
#include "kernels/view.h"

namespace bareyolo {

// Bytes in use and reserved (in use plus cached), their peaks, and the allocator's counters.
using DeviceMemoryStats = cuda::MemoryStats;
// A request the device cannot hold even after the cache went back: the one allocation failure
// a caller may recover from (this size does not fit).
using OutOfDeviceMemory = cuda::OutOfDeviceMemory;

DeviceMemoryStats device_memory_stats(const Device& gpu);
// The device's whole memory as its driver reports it.
size_t device_memory_total_bytes(const Device& gpu);
// Restarts the peaks from what is in use and reserved now, to measure one piece of work.
void reset_peak_memory_stats(const Device& gpu);
// Returns the allocator's cached (free) blocks to the driver, e.g. after OutOfDeviceMemory.
void release_cached_memory(const Device& gpu);

}  // namespace bareyolo
