// kernels/cpu/loops.h — the two loop shapes the CPU elementwise kernels share, the shape
// check they all start with, and zeroing a block of memory on the pool. The two loops walk a
// View image by image (an image is contiguous; the batch may not be) and split the work over
// the thread pool in shape-determined chunks.
#pragma once

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "kernels/cpu/thread_pool.h"
#include "kernels/view.h"

namespace bareyolo::cpu {

template <class A, class B>
void require_same_shape(const char* op, const View<A>& a, const View<B>& b) {
  if (!(a.shape == b.shape))
    throw std::invalid_argument(std::string(op) + ": shapes " + a.shape.str() + " and " +
                                b.shape.str() + " differ; they must be equal");
}

// Elements per chunk of parallel_over_elements: small enough that one large image still
// spreads over all threads, large enough that a chunk outweighs the pool's bookkeeping.
constexpr int64_t kElementGrain = 1 << 14;

// fn(image, begin, end) over every element range of `shape`, in chunks of at most
// kElementGrain elements that start at multiples of it within each image.
template <class Fn>
void parallel_over_elements(const Shape4& shape, Fn&& fn) {
  constexpr int64_t grain = kElementGrain;
  const int64_t per_image = shape.image_numel();
  if (per_image == 0 || shape.n == 0) return;
  const int64_t chunks_per_image = (per_image + grain - 1) / grain;
  parallel_for(shape.n * chunks_per_image, 1, [&](int64_t first, int64_t last) {
    for (int64_t chunk = first; chunk < last; ++chunk) {
      int64_t image = chunk / chunks_per_image;
      int64_t begin = (chunk % chunks_per_image) * grain;
      fn(image, begin, std::min(per_image, begin + grain));
    }
  });
}

// fn(image, channel) over every (image, channel) plane of `shape`, in chunks of about
// kElementGrain elements' worth of planes. (One plane per chunk, a 10x10 map's 2048 planes in
// a batch of 16 were claimed one by one, each claim an atomic on a cache line both cores
// write: two threads ran upsampling and max pooling slower than one.)
template <class Fn>
void parallel_over_planes(const Shape4& shape, Fn&& fn) {
  const int64_t planes_per_chunk =
      std::max<int64_t>(1, kElementGrain / std::max<int64_t>(1, shape.plane()));
  parallel_for(shape.n * shape.c, planes_per_chunk, [&](int64_t first, int64_t last) {
    for (int64_t plane = first; plane < last; ++plane) fn(plane / shape.c, plane % shape.c);
  });
}

// dst[0, bytes) = 0 in chunks of kZeroGrainBytes over the thread pool. Backward zeroes each
// gradient it will accumulate into (~3% of a yolov5n step, all of it serial before): a pass
// over memory, which a second thread speeds up as far as the memory system does
// (bench/memory_bandwidth.h). Blocks of one chunk or less are zeroed inline.
constexpr int64_t kZeroGrainBytes = 256 * 1024;
inline void parallel_zero(char* dst, int64_t bytes) {
  parallel_for(bytes, kZeroGrainBytes, [&](int64_t begin, int64_t end) {
    std::memset(dst + begin, 0, static_cast<size_t>(end - begin));
  });
}

}  // namespace bareyolo::cpu
