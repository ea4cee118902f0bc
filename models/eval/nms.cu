// models/eval/nms.cu — non_max_suppression of each image of a batch of decoded rows on the GPU
// (detect_cuda.h), step for step as models/eval/nms.cpp:
//   1-4 candidate_kernel: one thread per candidate slot — (row, class) with multi_label, else
//       (row, its first best class) — tests objectness and score against conf_threshold and
//       the class filter, as the host does (score = class score * objectness, one rounded
//       multiply);
//   5   the flagged slots in slot order (cub::DeviceSelect::Flagged, stable), then sorted by
//       score descending (cub::DeviceRadixSort, stable: ties keep slot order, as the host's
//       std::stable_sort), cut to max_nms;
//   6   offset_boxes_kernel: corners (cx -+ w / 2) shifted by class * class_offset, then
//       greedy_nms_on_device (greedy_nms.cu), whose kept indices and count stay on the device;
//   7   gather_kernel: the kept detections (unshifted boxes) into the image's places among
//       the batch's results, and their count.
// The host waits for each image's number of candidates (it sizes the sort and the IoU matrix),
// and once more at the end, for every image's results in one copy.
// The multiplies and adds are explicitly rounded (__fmul_rn, __fadd_rn) where nvcc could fuse
// them into an FMA the host rounds twice.
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_select.cuh>

#include <algorithm>
#include <vector>

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

// out[k] for each kept index k < *kept_count (launched for the most that can be kept).
__global__ void gather_kernel(CandidateSlots c, const int64_t* sorted_slots,
                              const float* sorted_scores, const int* class_of, const int64_t* kept,
                              const int64_t* kept_count, NmsDetection* out) {
  const int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (k >= *kept_count) return;
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

// The scratch of one image: per slot its score, class, flag and index; the selected slots and
// the sorted ones with their keys; 4 corners per ranked box; the selected count; the kept
// indices; CUB's space.
struct Scratch {
  float *score, *keys, *sorted_keys, *boxes;
  int* class_of;
  unsigned char* flag;
  int64_t *slot_index, *selected, *sorted_slots, *selected_count, *kept;
  void* cub;

  Scratch(Carver& carve, int64_t slots, int64_t most_kept, size_t cub_bytes)
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
        kept(carve.take<int64_t>(most_kept)),
        cub(carve.take<char>(int64_t(cub_bytes))) {}
};

// Where an image's results go: its count, and room for the most it can keep, `places`
// (min(slots, max_nms, max_det) detections; batch_detections sizes them).
struct ImageResults {
  int64_t* count;
  NmsDetection* detections;
  int64_t places;
};

// One image's NMS of `count` rows into `results` (on the device; its count is zero already).
// The host waits once, for the number of candidates.
void image_nms(const float* rows, int64_t count, int classes, const NmsOptions& params,
               const unsigned char* wanted, ImageResults results, int device) {
  const int64_t slots = params.multi_label ? count * classes : count;
  if (slots == 0) return;
  const cudaStream_t stream = stream_of(device);
  const CandidateSlots c{rows, slots, classes, params.multi_label, params.conf_threshold, wanted};

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
  (void)Scratch(measure, slots, results.places, cub_bytes);
  DeviceBuffer block(measure.used(), device);
  Carver carve(block.get());
  const Scratch t(carve, slots, results.places, cub_bytes);

  candidate_kernel<<<blocks_for(slots), kThreads, 0, stream>>>(c, t.score, t.class_of, t.flag,
                                                               t.slot_index);
  BAREYOLO_CUDA_CHECK_LAUNCH();
  size_t select_space = cub_bytes;  // CUB takes the size by reference: each call its own copy
  count_launch();                   // CUB's kernels for one call count as one launch
  BAREYOLO_CUDA_CHECK(cub::DeviceSelect::Flagged(t.cub, select_space, t.slot_index, t.flag,
                                                 t.selected, t.selected_count, slots, stream));
  int64_t candidates = 0;
  copy(&candidates, t.selected_count, sizeof(candidates), CopyKind::device_to_host, device);
  if (candidates == 0) return;

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
  const int64_t keep = std::min(ranked, int64_t(params.max_det));
  greedy_nms_on_device(t.boxes, ranked, params.iou_threshold, keep, t.kept, results.count, device);
  gather_kernel<<<blocks_for(keep), kThreads, 0, stream>>>(
      c, t.sorted_slots, t.sorted_keys, t.class_of, t.kept, results.count, results.detections);
  BAREYOLO_CUDA_CHECK_LAUNCH();
}

}  // namespace

std::vector<std::vector<models::Detection>> batch_detections(View<const float> rows, int64_t images,
                                                             int classes,
                                                             const NmsOptions& options) {
  // (models::batch_detections checked the rows' shape and the classes.)
  std::vector<std::vector<models::Detection>> detections(size_t(std::max<int64_t>(images, 0)));
  if (images <= 0 || options.max_det <= 0 || options.max_nms <= 0) return detections;
  const int device = rows.device.index;
  const int64_t per_image = rows.shape.numel() / images, row_length = 5 + int64_t(classes);

  DeviceBuffer wanted;  // the class filter, once for the batch
  if (!options.classes.empty()) {
    std::vector<unsigned char> mask(size_t(classes), 0);
    for (int c : options.classes)
      if (c >= 0 && c < classes) mask[size_t(c)] = 1;
    wanted = DeviceBuffer(mask.size(), device);
    copy(wanted.get(), mask.data(), mask.size(), CopyKind::host_to_device, device);
  }
  // The batch's results in one block: every image's count, then room for the most it can keep.
  const int64_t image_rows = per_image / row_length,
                slots = options.multi_label ? image_rows * classes : image_rows;
  const int64_t places = std::min({slots, int64_t(options.max_nms), int64_t(options.max_det)});
  if (places == 0) return detections;
  const size_t counts_bytes = sizeof(int64_t) * size_t(images),
               bytes = counts_bytes + sizeof(NmsDetection) * size_t(places * images);
  DeviceBuffer results(bytes, device);
  auto* counts = results.as<int64_t>();
  auto* found = reinterpret_cast<NmsDetection*>(results.as<char>() + counts_bytes);
  fill_bytes(counts, 0, counts_bytes, device);
  for (int64_t image = 0; image < images; ++image)
    image_nms(rows.data + image * per_image, image_rows, classes, options,
              wanted.as<unsigned char>(), {counts + image, found + image * places, places}, device);

  std::vector<char> host(bytes);
  copy(host.data(), results.get(), bytes, CopyKind::device_to_host, device);
  const auto* host_counts = reinterpret_cast<const int64_t*>(host.data());
  const auto* host_found = reinterpret_cast<const NmsDetection*>(host.data() + counts_bytes);
  for (int64_t image = 0; image < images; ++image) {
    std::vector<models::Detection>& kept = detections[size_t(image)];
    for (int64_t k = 0; k < host_counts[image]; ++k) {
      const NmsDetection& d = host_found[image * places + k];
      kept.push_back({{d.x1, d.y1, d.x2, d.y2}, d.conf, d.class_id});
    }
  }
  return detections;
}

}  // namespace bareyolo::cuda
