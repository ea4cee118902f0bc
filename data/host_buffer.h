// data/host_buffer.h — the memory a batch's images live in on the host.
//
// This is the one place batch memory is allocated. Today it is 64-byte aligned pageable
// memory. When CUDA is used, this is where page-locked (pinned) memory plugs in
// (cudaHostAlloc through kernels/cuda/runtime.h), so that the copy to the GPU can run
// asynchronously on a stream; nothing else in the pipeline needs to change.
#pragma once

#include <cstddef>
#include <memory>

namespace bareyolo::data {

struct HostBufferFree {
  void operator()(float* data) const noexcept;
};
using HostBuffer = std::unique_ptr<float[], HostBufferFree>;

// `count` floats, 64-byte aligned, uninitialised. Throws std::bad_alloc.
HostBuffer allocate_host_buffer(size_t count);

}  // namespace bareyolo::data
