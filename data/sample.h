// data/sample.h — one image as the model sees it: the training pipeline (mosaic or letterbox,
// copy-paste, random perspective, mixup, HSV, flips) and the validation one (letterbox only).
//
// Training, YOLOv5's order of operations and of random draws:
//   1. with probability hyp.mosaic (the draw is always made) a mosaic: mosaic.h, copy-paste
//      (copy_paste.h), random_perspective with border -imgsz/2, then with probability
//      hyp.mixup a second such mosaic of a random image blended in (mixup.h; its draws, made
//      only when hyp.mixup > 0: the chance, the image, that mosaic's, the ratio). Otherwise
//      letterbox to imgsz x imgsz (may enlarge) and random_perspective with border 0. With a
//      rect canvas (--rect): no mosaic (and no draw for it, as in YOLOv5), letterbox to the
//      canvas, random_perspective with border 0;
//   2. boxes -> normalised xywh, clipped to the image (boxes.h);
//   3. HSV jitter (hsv.h);
//   4. up-down flip with p = flipud, then left-right flip with p = fliplr (both draws made).
// Every draw comes from the SampleRng the caller passes, keyed by (seed, epoch, position).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "data/augment_hyp.h"
#include "data/dataset.h"
#include "data/image.h"
#include "data/label_file.h"
#include "data/letterbox.h"  // defines: ImageSize
#include "data/rng.h"

namespace bareyolo::data {

// Where a network-input image came from. For a letterboxed image, a point maps back to the
// original as x0 = (x - pad_x) / gain_x, y0 = (y - pad_y) / gain_y. A mosaic has no such
// mapping (letterboxed = false).
struct ImageMeta {
  std::string path;
  int original_width = 0, original_height = 0;
  bool letterboxed = false;
  double gain_x = 1, gain_y = 1;
  double pad_x = 0, pad_y = 0;
};

struct Sample {
  Image image;                   // RGB, the size the batch asks for
  std::vector<LabelBox> labels;  // normalised xywh on `image`
  ImageMeta meta;
};

Sample make_train_sample(const Dataset& dataset, int64_t index, int imgsz, const AugmentHyp& hyp,
                         SampleRng& rng, std::optional<ImageSize> rect_canvas = std::nullopt);

// Letterboxes image `index` (read with its long side at imgsz) into width x height, never
// enlarging it (YOLOv5's validation: scaleup=False).
Sample make_val_sample(const Dataset& dataset, int64_t index, int imgsz, int width, int height);

}  // namespace bareyolo::data
