// kernels/cuda/nms.cu — greedy NMS with the pairwise IoU tests on the GPU (see cuda_ops.h).
//
// The boxes, sorted by score, are cut into blocks of 64. Block (column b, row r) of the grid
// loads column block b's boxes into shared memory and thread t tests box i = 64 r + t against
// each of them: bit k of word mask[i][b] says that box 64 b + k comes after i and overlaps it
// by more than the threshold. The greedy walk is sequential (whether box i survives depends
// on every earlier decision), so it runs on the host over the copied bit matrix: one OR of
// a row of words per kept box. The IoU is computed with the same float operations in the
// same order as models::greedy_nms (explicitly rounded intrinsics, so nvcc cannot fuse a
// multiply-add the CPU rounds twice): a pair exactly on the threshold falls on the same side.
#include <stdexcept>
#include <string>

#include "kernels/cuda/check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/runtime.h"

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

}  // namespace

std::vector<int64_t> greedy_nms(const float* boxes, int64_t count, float iou_threshold,
                                int64_t max_keep, int device) {
  std::vector<int64_t> kept;
  if (count <= 0 || max_keep <= 0) return kept;
  const int64_t words = (count + kBlockBoxes - 1) / kBlockBoxes;
  if (words > 65535)
    throw std::invalid_argument("greedy_nms on CUDA: " + std::to_string(count) +
                                " boxes; at most " + std::to_string(65535 * kBlockBoxes) +
                                " (keep fewer candidates: max_nms)");
  const size_t mask_bytes = size_t(count) * size_t(words) * sizeof(uint64_t);
  struct Scratch {
    void* pointer;
    int device;
    ~Scratch() { free_device(pointer, device); }
  } scratch{malloc_device(mask_bytes, device), device};
  auto stream = static_cast<cudaStream_t>(compute_stream(device));
  overlap_mask_kernel<<<dim3(unsigned(words), unsigned(words)), kBlockBoxes, 0, stream>>>(
      reinterpret_cast<const Box*>(boxes), count, iou_threshold, words,
      static_cast<uint64_t*>(scratch.pointer));
  BAREYOLO_CUDA_CHECK(cudaGetLastError());
  std::vector<uint64_t> mask(size_t(count) * size_t(words));
  copy(mask.data(), scratch.pointer, mask_bytes, CopyKind::device_to_host, device);

  std::vector<uint64_t> removed(size_t(words), 0);
  for (int64_t i = 0; i < count && int64_t(kept.size()) < max_keep; ++i) {
    if (removed[size_t(i / kBlockBoxes)] >> (i % kBlockBoxes) & 1) continue;
    kept.push_back(i);
    const uint64_t* row = mask.data() + size_t(i) * size_t(words);
    for (int64_t w = i / kBlockBoxes; w < words; ++w) removed[size_t(w)] |= row[w];
  }
  return kept;
}

}  // namespace bareyolo::cuda
