// data/batch.h — what the trainer receives per step (YOLOv5's collate layout, but for the images):
//
//   images   uint8, HWC, RGB, size x height x width x 3, the samples' bytes as the loader made
//            them, in a HostBuffer (host_buffer.h: pinned when CUDA is used) that the device
//            copies straight from: a quarter of the bytes of YOLOv5's float batch. The device
//            makes the model's float NCHW input of them (images_tensor);
//   targets  float32 rows [image_index, class, cx, cy, w, h], cx..h normalised to the image,
//            image_index = the image's place in this batch;
//   meta     per image: file, original size, letterbox gain and padding (validation);
//   matched  the targets matched to the detector's grid cells (YOLOv5's build_targets), when
//            the trainer gave the loader a matcher: the loss's input, made on a loader thread
//            so that the training step does not spend the trainer's thread on it.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "data/host_buffer.h"
#include "data/sample.h"
#include "data/sampler.h"
#include "engine/tensor.h"

namespace bareyolo::data {

// One label of a batch: a row of Batch::targets, YOLOv5's collate row [image_index, class, cx,
// cy, w, h], with the box normalised to the batch image (letterboxed, augmented).
struct LabelRow {
  int image = 0;
  int class_id = 0;
  float cx = 0, cy = 0, w = 0, h = 0;
};

// A target matched to a prediction cell of one level (models/loss/loss_targets.h says how).
struct MatchedRow {
  int image, anchor, gj, gi;  // the prediction cell: p[image, anchor, gj, gi]
  double tx, ty, tw, th;      // target box: xy offset from the cell corner, wh (grid units)
  double anchor_w, anchor_h;  // the matched anchor (grid units)
  int class_id;
  bool operator==(const MatchedRow&) const = default;
};

// A batch's labels matched to the grids of one input size.
struct MatchedTargets {
  std::vector<std::array<int, 2>> grids;        // per level: the grid's rows, columns
  std::vector<std::vector<MatchedRow>> levels;  // per level: the matched rows
};

struct Batch {
  int64_t step = 0;
  int size = 0;
  int height = 0, width = 0;  // of the images in `images`, as the loader built them
  // The size the model takes them at: height x width, or the step's --multi-scale size, to
  // which images_tensor resizes them on the device (Step::input_width).
  int input_height = 0, input_width = 0;
  HostBuffer images;
  std::vector<float> targets;  // num_targets() rows of 6
  std::vector<ImageMeta> meta;
  std::optional<MatchedTargets> matched;  // for the grids of input_height x input_width

  int64_t num_targets() const { return int64_t(targets.size() / 6); }
  // Row r of `targets` (collate writes the rows; this reads them).
  LabelRow label(int64_t r) const {
    const float* row = targets.data() + r * 6;
    return {int(row[0]), int(row[1]), row[2], row[3], row[4], row[5]};
  }
  std::vector<LabelRow> labels() const;  // every row, as label() reads it
  size_t image_bytes() const { return size_t(height) * width * 3; }
  const uint8_t* image(int i) const { return images.get() + size_t(i) * image_bytes(); }
  // The model's input on `device`: float NCHW, size x 3 x input_height x input_width, values
  // byte / 255 (ops::hwc_bytes_to_unit_float), resized bilinearly to the input size where it
  // differs from the images' (ops::resize_bilinear, as YOLOv5 resizes its float batch). The
  // bytes reach a GPU by a copy from the pinned buffer queued on the compute stream, and both
  // ops run there: the host does not wait, and the buffer is not reused before the copy
  // completes (host_buffer.h).
  Tensor images_tensor(Device device = Device::cpu()) const;
  // images_tensor's second half: the input made from `bytes`, the images already on the device
  // (u8, size x height x width x 3), on its compute stream.
  Tensor input_from_bytes(const Tensor& bytes) const;
};

// Collates the samples of `step` (each step.width x step.height) into a Batch of that size,
// their bytes copied as they are; the batch's input size is the step's (its input_width and
// input_height where set: --multi-scale).
Batch collate(const Step& step, std::vector<Sample>& samples);

}  // namespace bareyolo::data
