// data/batch.h — what the trainer receives per step (YOLOv5's collate layout):
//
//   images   float32, NCHW, RGB, values in [0, 1] (byte / 255), size x 3 x height x width,
//            in a HostBuffer (host_buffer.h: pinned when CUDA is used), read by the device
//            straight from there (images_tensor);
//   targets  float32 rows [image_index, class, cx, cy, w, h], cx..h normalised to the image,
//            image_index = the image's place in this batch;
//   meta     per image: file, original size, letterbox gain and padding (validation).
#pragma once

#include <cstdint>
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

struct Batch {
  int64_t step = 0;
  int size = 0, height = 0, width = 0;
  HostBuffer images;
  std::vector<float> targets;  // num_targets() rows of 6
  std::vector<ImageMeta> meta;

  int64_t num_targets() const { return int64_t(targets.size() / 6); }
  // Row r of `targets` (collate writes the rows; this reads them).
  LabelRow label(int64_t r) const {
    const float* row = targets.data() + r * 6;
    return {int(row[0]), int(row[1]), row[2], row[3], row[4], row[5]};
  }
  size_t image_floats() const { return size_t(3) * height * width; }
  const float* image(int i) const { return images.get() + size_t(i) * image_floats(); }
  // The images as an NCHW tensor on `device`, what the model takes: a copy of the buffer on
  // the host; on a GPU a copy from the pinned buffer queued on the compute stream (the host
  // does not wait; the buffer is not reused before the copy completes, host_buffer.h).
  Tensor images_tensor(Device device = Device::cpu()) const;
};

// Collates the samples of `step` (each step.width x step.height) into a Batch of that size,
// or, where the step sets an input size (--multi-scale), resized to it: each image plane
// bilinearly from its float values (plane_resize.h), as YOLOv5 resizes its float batch.
Batch collate(const Step& step, std::vector<Sample>& samples);

}  // namespace bareyolo::data
