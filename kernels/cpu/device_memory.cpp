// kernels/cpu/device_memory.cpp — see kernels/device_memory.h. Host memory is handled here;
// a GPU's goes to kernels/cuda/runtime (in a build without CUDA, its stand-ins throw).
#include "kernels/device_memory.h"

#include <cstdlib>
#include <cstring>
#include <string>

#include "kernels/caching_allocator.h"
#include "kernels/cpu/host_memory.h"
#include "kernels/cpu/loops.h"
#include "kernels/op_sequence.h"
#include "kernels/step_guard.h"

namespace bareyolo {

namespace {
// The CUDA runtime's name for a copy between these two devices (at least one a GPU).
cuda::CopyKind copy_kind(const Device& dst_device, const Device& src_device) {
  if (in_host_memory(src_device)) return cuda::CopyKind::host_to_device;
  if (in_host_memory(dst_device)) return cuda::CopyKind::device_to_host;
  return cuda::CopyKind::device_to_device;
}
// Host memory's caching allocator: one free list (the host has no streams; the tag only has to
// be the same for every block). Blocks are multiples of 512 bytes, so 64-byte aligned_alloc fits
// them; created on first use and never destroyed, so that tensors freed during static
// destruction still find it.
constexpr int kHostStream = 0;
CachingAllocator& host_allocator() {
  static CachingAllocator* allocator =
      new CachingAllocator({.name = "host memory",
                            .allocate = [](size_t bytes) { return std::aligned_alloc(64, bytes); },
                            .release = [](void* pointer) { std::free(pointer); },
                            .synchronize = [] {},
                            .bounded_reserve = true});
  return *allocator;
}

void report_miss(bool from_backing, size_t bytes, SourceLocation where) {
  if (from_backing)
    step_guard::report(step_guard::Event::system_allocation,
                       "a " + std::to_string(bytes) + "-byte allocation", where);
}

}  // namespace

bool in_host_memory(const Device& device) { return device.is_cpu(); }

void* allocate_bytes(size_t bytes, const Device& device, const char* purpose,
                     SourceLocation where) {
  bool from_backing = false;
  void* data = nullptr;
  if (in_host_memory(device)) {
    data = host_allocator().try_allocate(bytes, &kHostStream, &from_backing);
    if (!data) throw_host_out_of_memory(CachingAllocator::size_class(bytes), purpose);
  } else {
    data = cuda::malloc_device(bytes == 0 ? 1 : bytes, device.index, &from_backing);
  }
  report_miss(from_backing, bytes, where);
  op_sequence::note("allocate", data, device, bytes);
  return data;
}

void release_bytes(void* data, const Device& device) noexcept {
  if (in_host_memory(device))
    host_allocator().release(data);
  else
    cuda::free_device(data, device.index);
}

void copy_bytes(void* dst, const Device& dst_device, const void* src, const Device& src_device,
                size_t bytes, SourceLocation where) {
  op_sequence::note("copy", dst, dst_device, src, src_device, bytes);
  if (in_host_memory(dst_device) && in_host_memory(src_device)) {
    std::memcpy(dst, src, bytes);
    return;
  }
  // The stream of the GPU side: the destination's when both are GPUs.
  const int gpu = in_host_memory(dst_device) ? src_device.index : dst_device.index;
  cuda::copy(dst, src, bytes, copy_kind(dst_device, src_device), gpu, where);
}

void zero_bytes(void* data, size_t bytes, const Device& device) {
  op_sequence::note("zero", data, device, bytes);
  if (in_host_memory(device))
    cpu::parallel_zero(static_cast<char*>(data), static_cast<int64_t>(bytes));
  else
    cuda::fill_bytes(data, 0, bytes, device.index);
}

DeviceEvent upload_async(void* dst, const Device& dst_device, const void* host_src, size_t bytes) {
  op_sequence::note("upload from", dst, dst_device, host_src, bytes);
  if (in_host_memory(dst_device)) {
    std::memcpy(dst, host_src, bytes);
    return {};
  }
  cuda::copy_async(dst, host_src, bytes, cuda::CopyKind::host_to_device, dst_device.index);
  return DeviceEvent::record(dst_device.index);
}

DeviceEvent download_async(void* host_dst, const void* src, const Device& src_device,
                           size_t bytes) {
  op_sequence::note("download into", host_dst, src, src_device, bytes);
  if (in_host_memory(src_device)) {
    std::memcpy(host_dst, src, bytes);
    return {};
  }
  cuda::copy_async(host_dst, src, bytes, cuda::CopyKind::device_to_host, src_device.index);
  return DeviceEvent::record(src_device.index);
}

DeviceEvent mark_device_work(const Device& device) {
  if (in_host_memory(device)) return {};
  return DeviceEvent::record(device.index);
}

DeviceEvent upload_beside_compute(void* dst, const Device& dst_device, const void* host_src,
                                  size_t bytes, const DeviceEvent& dst_free) {
  op_sequence::note("upload beside compute", dst, dst_device, host_src, bytes);
  if (in_host_memory(dst_device)) {
    std::memcpy(dst, host_src, bytes);
    return {};
  }
  return cuda::upload_beside_compute(dst, host_src, bytes, dst_device.index, dst_free);
}

void wait_for_device(const Device& device, SourceLocation where) {
  if (!in_host_memory(device)) cuda::synchronize(device.index, where);
}

void* allocate_pinned_host_bytes(size_t bytes) { return cuda::malloc_pinned(bytes); }
void release_pinned_host_bytes(void* data) noexcept { cuda::free_pinned(data); }

}  // namespace bareyolo
