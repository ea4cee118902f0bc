// kernels/cpu/thread_scratch.h — a grow-only buffer per thread, reused across calls: the CPU
// kernels' scratch (convolution column matrices and partial sums, SiLU's gradient in the fused
// BatchNorm ops), so that training allocates none of it after the first step.
#pragma once

#include <cstdint>
#include <vector>

namespace bareyolo::cpu {

// At least `count` values of T owned by the calling thread. Tag tells apart buffers that may be
// in use at the same time: each user passes a type of its own (declared in its file's anonymous
// namespace, so no two files share one).
template <class T, class Tag>
T* thread_scratch(int64_t count) {
  thread_local std::vector<T> buffer;
  if (buffer.size() < static_cast<size_t>(count)) buffer.resize(static_cast<size_t>(count));
  return buffer.data();
}

}  // namespace bareyolo::cpu
