// data/host_buffer.cpp — batch memory (see host_buffer.h for the pinned-memory seam).
#include "data/host_buffer.h"

#include <cstdlib>
#include <new>

namespace bareyolo::data {

namespace {
constexpr size_t kAlignment = 64;
}

void HostBufferFree::operator()(float* data) const noexcept { std::free(data); }

HostBuffer allocate_host_buffer(size_t count) {
  size_t bytes = (count * sizeof(float) + kAlignment - 1) / kAlignment * kAlignment;
  void* data = std::aligned_alloc(kAlignment, bytes == 0 ? kAlignment : bytes);
  if (data == nullptr) throw std::bad_alloc();
  return HostBuffer(static_cast<float*>(data));
}

}  // namespace bareyolo::data
