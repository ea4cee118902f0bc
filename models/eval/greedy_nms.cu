// models/eval/greedy_nms.cu — greedy NMS with the pairwise IoU tests on the GPU (detect_cuda.h).
//
// The boxes, sorted by score, are cut into blocks of 64. Block (column b, row r) of the grid
// loads column block b's boxes into shared memory and thread t tests box i = 64 r + t against
// each of them: bit k of word mask[i][b] says that box 64 b + k comes after i and overlaps it
// by more than the threshold. The greedy walk is sequential (whether box i survives depends
// on every earlier decision): one block walks the boxes in order, a removed box costs one
// bit test, a kept one an OR of its row of words into the removed set by all threads, then a
// barrier. The kept indices and their count stay on the device (greedy_nms_on_device, for the
// NMS that gathers its detections there), or only they come back (greedy_nms). The IoU
// is computed with the same float operations in the same order as models::greedy_nms (explicitly
// rounded intrinsics, so nvcc cannot fuse a multiply-add the CPU rounds twice): a pair exactly on
// the threshold falls on the same side.
#include <algorithm>
#include <stdexcept>
#include <string>

#include "kernels/cuda/runtime/allocator.h"
#include "kernels/cuda/runtime/check.h"
#include "kernels/cuda/runtime/runtime.h"
#include "kernels/cuda/runtime/stream.h"
#include "models/eval/detect_cuda.h"

namespace bareyolo::cuda {

namespace {

constexpr int kBlockBoxes = 64;  // one bit per box in a 64-bit word

struct Box {
  float x1, y1, x2, y2;
};

__device__ float area_of(const Box& b) { return __fmul_rn(b.x2 - b.x1, b.y2 - b.y1); }

__device__ bool overlaps(const Box& a, const Box& b, float threshold) {
  const float w = fmaxf(0.0f, fminf(a.x2, b.x2) - fmaxf(a.x1, b.x1));
  const float h = fmaxf(0.0f, fminf(a.y2, b.y2) - fmaxf(a.y1, b.y1));
  const float inter = __fmul_rn(w, h);
  const float uni = __fsub_rn(__fadd_rn(area_of(a), area_of(b)), inter);
  return __fdiv_rn(inter, uni) > threshold;
}

__global__ void overlap_mask_kernel(const Box* boxes, int64_t count, float threshold,
                                    int64_t words_per_row, uint64_t* mask) {
  const int64_t column_block = blockIdx.x, row_block = blockIdx.y;
  __shared__ Box column[kBlockBoxes];
  const int64_t first_column = column_block * kBlockBoxes;
  const int columns = count - first_column < kBlockBoxes ? int(count - first_column) : kBlockBoxes;
  if (int(threadIdx.x) < columns) column[threadIdx.x] = boxes[first_column + threadIdx.x];
  __syncthreads();
  const int64_t i = row_block * kBlockBoxes + threadIdx.x;
  if (i >= count) return;
  uint64_t bits = 0;
  if (column_block >= row_block) {  // only boxes after i matter
    const Box me = boxes[i];
    for (int k = 0; k < columns; ++k)
      if (first_column + k > i && overlaps(me, column[k], threshold)) bits |= uint64_t(1) << k;
  }
  mask[i * words_per_row + column_block] = bits;
}

constexpr int kWalkThreads = 256;

// The greedy walk over the bit matrix: kept[0 .. *kept_count) = the kept boxes in order.
// `removed` (words_per_row words, global memory) is this block's own; __syncthreads makes
// the ORs of one kept box visible to every thread before the next box is tested, and a
// barrier before them keeps the ORs from racing with the slower threads' test of box i.
__global__ void __launch_bounds__(kWalkThreads)
    greedy_walk_kernel(const uint64_t* mask, int64_t count, int64_t words_per_row, int64_t max_keep,
                       uint64_t* removed, int64_t* kept, int64_t* kept_count) {
  for (int64_t w = threadIdx.x; w < words_per_row; w += blockDim.x) removed[w] = 0;
  __syncthreads();
  int64_t kept_so_far = 0;  // the same in every thread: every branch below is uniform
  for (int64_t i = 0; i < count && kept_so_far < max_keep; ++i) {
    if (removed[i / kBlockBoxes] >> (i % kBlockBoxes) & 1) continue;
    if (threadIdx.x == 0) kept[kept_so_far] = i;
    ++kept_so_far;
    __syncthreads();  // every thread has tested bit i before any word changes
    const uint64_t* row = mask + i * words_per_row;
    for (int64_t w = i / kBlockBoxes + threadIdx.x; w < words_per_row; w += blockDim.x)
      removed[w] |= row[w];
    __syncthreads();
  }
  if (threadIdx.x == 0) *kept_count = kept_so_far;
}

}  // namespace

void greedy_nms_on_device(const float* boxes, int64_t count, float iou_threshold, int64_t max_keep,
                          int64_t* kept, int64_t* kept_count, int device) {
  const int64_t words = (count + kBlockBoxes - 1) / kBlockBoxes;
  if (words > 65535)
    throw std::invalid_argument("greedy_nms on CUDA: " + std::to_string(count) +
                                " boxes; at most " + std::to_string(65535 * kBlockBoxes) +
                                " (keep fewer candidates: max_nms)");
  // One scratch block: the matrix and the walk's removed set.
  DeviceBuffer scratch(sizeof(uint64_t) * (size_t(count) * size_t(words) + size_t(words)), device);
  uint64_t* mask = scratch.as<uint64_t>();
  uint64_t* removed = mask + size_t(count) * size_t(words);
  const cudaStream_t stream = stream_of(device);
  overlap_mask_kernel<<<dim3(unsigned(words), unsigned(words)), kBlockBoxes, 0, stream>>>(
      reinterpret_cast<const Box*>(boxes), count, iou_threshold, words, mask);
  BAREYOLO_CUDA_CHECK_LAUNCH();
  greedy_walk_kernel<<<1, kWalkThreads, 0, stream>>>(mask, count, words, max_keep, removed, kept,
                                                     kept_count);
  BAREYOLO_CUDA_CHECK_LAUNCH();
}

std::vector<int64_t> greedy_nms(const float* boxes, int64_t count, float iou_threshold,
                                int64_t max_keep, int device) {
  std::vector<int64_t> kept;
  if (count <= 0 || max_keep <= 0) return kept;
  const int64_t most_kept = std::min(count, max_keep);
  DeviceBuffer result(sizeof(int64_t) * size_t(most_kept + 1), device);  // the indices, the count
  int64_t* kept_on_device = result.as<int64_t>();
  greedy_nms_on_device(boxes, count, iou_threshold, most_kept, kept_on_device,
                       kept_on_device + most_kept, device);
  int64_t kept_total = 0;
  copy(&kept_total, kept_on_device + most_kept, sizeof(kept_total), CopyKind::device_to_host,
       device);
  kept.resize(size_t(kept_total));
  if (kept_total > 0)
    copy(kept.data(), kept_on_device, sizeof(int64_t) * size_t(kept_total),
         CopyKind::device_to_host, device);
  return kept;
}

}  // namespace bareyolo::cuda
