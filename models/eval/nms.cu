// models/eval/nms.cu — non_max_suppression of one image's decoded rows on the GPU
// (detect_cuda.h), step for step as models/eval/nms.cpp:
//   1-4 candidate_kernel: one thread per candidate slot — (row, class) with multi_label, else
//       (row, its first best class) — tests objectness and score against conf_threshold and
//       the class filter, as the host does (score = class score * objectness, one rounded
//       multiply);
//   5   the flagged slots in slot order (cub::DeviceSelect::Flagged, stable), then sorted by
//       score descending (cub::DeviceRadixSort, stable: ties keep slot order, as the host's
//       std::stable_sort), cut to max_nms;
//   6   offset_boxes_kernel: corners (cx -+ w / 2) shifted by class * class_offset, then
//       greedy_nms (greedy_nms.cu), which returns only the kept indices;
//   7   gather_kernel: the kept detections (unshifted boxes), copied back.
// The multiplies and adds are explicitly rounded (__fmul_rn, __fadd_rn) where nvcc could fuse
// them into an FMA the host rounds twice.
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_select.cuh>

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

constexpr int kThreads = 256;

// One kept detection as the gather kernel writes it (models::Detection once on the host).
struct NmsDetection {
  float x1, y1, x2, y2;  // pixels of the network input
  float conf;
  int class_id;
};

unsigned blocks_for(int64_t count) { return unsigned((count + kThreads - 1) / kThreads); }

struct CandidateSlots {
  const float* rows;
  int64_t slots;
  int classes;
  bool multi_label;
  float conf_threshold;
  const unsigned char* wanted;  // per class, or null: every class
};

__device__ int64_t row_of(const CandidateSlots& c, int64_t slot) {
  return c.multi_label ? slot / c.classes : slot;
}

__global__ void candidate_kernel(CandidateSlots c, float* score, int* class_of, unsigned char* flag,
                                 int64_t* slot_index) {
  const int64_t slot = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (slot >= c.slots) return;
  const float* row = c.rows + row_of(c, slot) * (5 + c.classes);
  const float objectness = row[4];
  auto score_of = [&](int k) { return __fmul_rn(row[5 + k], objectness); };
  int cls = 0;
  if (c.multi_label) {
    cls = int(slot % c.classes);
  } else {
    for (int k = 1; k < c.classes; ++k)
      if (score_of(k) > score_of(cls)) cls = k;
  }
  const float s = score_of(cls);
  flag[slot] =
      objectness > c.conf_threshold && s > c.conf_threshold && (!c.wanted || c.wanted[cls]);
  score[slot] = s;
  class_of[slot] = cls;
  slot_index[slot] = slot;
}

__global__ void gather_scores_kernel(const int64_t* selected, int64_t count, const float* score,
                                     float* keys) {
  const int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (j < count) keys[j] = score[selected[j]];
}

__device__ void corners(const float* row, float out[4]) {
  const float half_w = row[2] / 2, half_h = row[3] / 2;
  out[0] = __fsub_rn(row[0], half_w);
  out[1] = __fsub_rn(row[1], half_h);
  out[2] = __fadd_rn(row[0], half_w);
  out[3] = __fadd_rn(row[1], half_h);
}

__global__ void offset_boxes_kernel(CandidateSlots c, const int64_t* sorted_slots, int64_t count,
                                    const int* class_of, float class_offset, bool agnostic,
                                    float* boxes) {
  const int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (j >= count) return;
  const int64_t slot = sorted_slots[j];
  float box[4];
  corners(c.rows + row_of(c, slot) * (5 + c.classes), box);
  const float shift = agnostic ? 0.0f : __fmul_rn(float(class_of[slot]), class_offset);
  for (int k = 0; k < 4; ++k) boxes[4 * j + k] = __fadd_rn(box[k], shift);
}

__global__ void gather_kernel(CandidateSlots c, const int64_t* sorted_slots,
                              const float* sorted_scores, const int* class_of, const int64_t* kept,
                              int64_t count, NmsDetection* out) {
  const int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (k >= count) return;
  const int64_t j = kept[k], slot = sorted_slots[j];
  float box[4];
  corners(c.rows + row_of(c, slot) * (5 + c.classes), box);
  out[k] = {box[0], box[1], box[2], box[3], sorted_scores[j], class_of[slot]};
}

// Consecutive pieces of one scratch block, each aligned to 16 bytes. Carving from a null
// base measures the block.
class Carver {
 public:
  explicit Carver(void* base) : base_(static_cast<char*>(base)) {}
  template <class T>
  T* take(int64_t count) {
    T* piece = base_ ? reinterpret_cast<T*>(base_ + used_) : nullptr;
    used_ += (sizeof(T) * size_t(count) + 15) / 16 * 16;
    return piece;
  }
  size_t used() const { return used_; }

 private:
  char* base_;
  size_t used_ = 0;
};

// The scratch of one call: per slot its score, class, flag and index; the selected slots and
// the sorted ones with their keys; 4 corners per ranked box; the selected count; CUB's space.
struct Scratch {
  float *score, *keys, *sorted_keys, *boxes;
  int* class_of;
  unsigned char* flag;
  int64_t *slot_index, *selected, *sorted_slots, *selected_count;
  void* cub;

  Scratch(Carver& carve, int64_t slots, size_t cub_bytes)
      : score(carve.take<float>(slots)),
        keys(carve.take<float>(slots)),
        sorted_keys(carve.take<float>(slots)),
        boxes(carve.take<float>(4 * slots)),
        class_of(carve.take<int>(slots)),
        flag(carve.take<unsigned char>(slots)),
        slot_index(carve.take<int64_t>(slots)),
        selected(carve.take<int64_t>(slots)),
        sorted_slots(carve.take<int64_t>(slots)),
        selected_count(carve.take<int64_t>(1)),
        cub(carve.take<char>(int64_t(cub_bytes))) {}
};

}  // namespace

std::vector<models::Detection> non_max_suppression(const float* rows, int64_t count, int classes,
                                                   const NmsOptions& params, int device) {
  if (classes < 1 || count < 0)
    throw std::invalid_argument("non_max_suppression on CUDA: " + std::to_string(count) +
                                " rows of " + std::to_string(classes) +
                                " classes; rows need at least one class");
  std::vector<models::Detection> detections;
  const int64_t slots = params.multi_label ? count * classes : count;
  if (slots == 0 || params.max_det <= 0 || params.max_nms <= 0) return detections;
  const cudaStream_t stream = stream_of(device);

  DeviceBuffer wanted;
  if (!params.classes.empty()) {
    std::vector<unsigned char> mask(size_t(classes), 0);
    for (int c : params.classes)
      if (c >= 0 && c < classes) mask[size_t(c)] = 1;
    wanted = DeviceBuffer(mask.size(), device);
    copy(wanted.get(), mask.data(), mask.size(), CopyKind::host_to_device, device);
  }
  const CandidateSlots c{
      rows, slots, classes, params.multi_label, params.conf_threshold, wanted.as<unsigned char>()};

  // CUB's scratch for the largest selection and sort.
  size_t select_bytes = 0, sort_bytes = 0;
  BAREYOLO_CUDA_CHECK(cub::DeviceSelect::Flagged(nullptr, select_bytes, (const int64_t*)nullptr,
                                                 (const unsigned char*)nullptr, (int64_t*)nullptr,
                                                 (int64_t*)nullptr, slots, stream));
  BAREYOLO_CUDA_CHECK(cub::DeviceRadixSort::SortPairsDescending(
      nullptr, sort_bytes, (const float*)nullptr, (float*)nullptr, (const int64_t*)nullptr,
      (int64_t*)nullptr, slots, 0, int(sizeof(float) * 8), stream));
  const size_t cub_bytes = std::max(select_bytes, sort_bytes);
  Carver measure(nullptr);
  (void)Scratch(measure, slots, cub_bytes);
  DeviceBuffer block(measure.used(), device);
  Carver carve(block.get());
  const Scratch t(carve, slots, cub_bytes);

  candidate_kernel<<<blocks_for(slots), kThreads, 0, stream>>>(c, t.score, t.class_of, t.flag,
                                                               t.slot_index);
  BAREYOLO_CUDA_CHECK_LAUNCH();
  size_t select_space = cub_bytes;  // CUB takes the size by reference: each call its own copy
  count_launch();                   // CUB's kernels for one call count as one launch
  BAREYOLO_CUDA_CHECK(cub::DeviceSelect::Flagged(t.cub, select_space, t.slot_index, t.flag,
                                                 t.selected, t.selected_count, slots, stream));
  int64_t candidates = 0;
  copy(&candidates, t.selected_count, sizeof(candidates), CopyKind::device_to_host, device);
  if (candidates == 0) return detections;

  gather_scores_kernel<<<blocks_for(candidates), kThreads, 0, stream>>>(t.selected, candidates,
                                                                        t.score, t.keys);
  BAREYOLO_CUDA_CHECK_LAUNCH();
  size_t sort_space = cub_bytes;
  count_launch();  // CUB's kernels for one call count as one launch
  BAREYOLO_CUDA_CHECK(cub::DeviceRadixSort::SortPairsDescending(
      t.cub, sort_space, t.keys, t.sorted_keys, t.selected, t.sorted_slots, candidates, 0,
      int(sizeof(float) * 8), stream));
  const int64_t ranked = std::min(candidates, int64_t(params.max_nms));
  offset_boxes_kernel<<<blocks_for(ranked), kThreads, 0, stream>>>(
      c, t.sorted_slots, ranked, t.class_of, params.class_offset, params.agnostic, t.boxes);
  BAREYOLO_CUDA_CHECK_LAUNCH();

  const std::vector<int64_t> kept =
      greedy_nms(t.boxes, ranked, params.iou_threshold, params.max_det, device);
  if (kept.empty()) return detections;
  const int64_t kept_count = int64_t(kept.size());
  DeviceBuffer kept_buffer(sizeof(int64_t) * kept.size() + sizeof(NmsDetection) * kept.size(),
                           device);
  int64_t* kept_on_device = kept_buffer.as<int64_t>();
  auto* out = reinterpret_cast<NmsDetection*>(kept_on_device + kept_count);
  copy(kept_on_device, kept.data(), sizeof(int64_t) * kept.size(), CopyKind::host_to_device,
       device);
  gather_kernel<<<blocks_for(kept_count), kThreads, 0, stream>>>(
      c, t.sorted_slots, t.sorted_keys, t.class_of, kept_on_device, kept_count, out);
  BAREYOLO_CUDA_CHECK_LAUNCH();
  std::vector<NmsDetection> gathered(kept.size());
  copy(gathered.data(), out, sizeof(NmsDetection) * kept.size(), CopyKind::device_to_host, device);
  detections.reserve(gathered.size());
  for (const NmsDetection& d : gathered)
    detections.push_back({{d.x1, d.y1, d.x2, d.y2}, d.conf, d.class_id});
  return detections;
}

std::vector<std::vector<models::Detection>> batch_detections(View<const float> rows, int64_t images,
                                                             int classes,
                                                             const NmsOptions& options) {
  const int64_t per_image = images > 0 ? rows.shape.numel() / images : 0;
  const int64_t row_length = 5 + int64_t(classes);
  std::vector<std::vector<models::Detection>> detections;
  detections.reserve(size_t(images));
  for (int64_t image = 0; image < images; ++image)
    detections.push_back(non_max_suppression(rows.data + image * per_image, per_image / row_length,
                                             classes, options, rows.device.index));
  return detections;
}

}  // namespace bareyolo::cuda
