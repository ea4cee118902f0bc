// data/sample.cpp — the training and validation pipelines for one image (see sample.h).
#include "data/sample.h"

#include <algorithm>

#include "data/boxes.h"
#include "data/copy_paste.h"
#include "data/hsv.h"
#include "data/letterbox.h"
#include "data/mixup.h"
#include "data/mosaic.h"
#include "data/perspective.h"
#include "data/stage_clock.h"

namespace bareyolo::data {

namespace {

// Letterboxes `loaded` into width x height and moves its labels along.
Sample letterboxed_sample(const Dataset& dataset, int64_t index, const LoadedImage& loaded,
                          int width, int height, bool scale_up, std::vector<PixelBox>& boxes) {
  Sample sample;
  LetterboxPlacement placement;
  sample.image = letterbox(loaded.image, width, height, scale_up, placement);
  float w = float(placement.ratio * loaded.image.width);
  float h = float(placement.ratio * loaded.image.height);
  boxes.clear();
  for (const LabelBox& box : dataset.record(index).boxes)
    boxes.push_back(to_pixels(box, w, h, float(placement.pad_x), float(placement.pad_y)));
  sample.meta = {dataset.record(index).path,
                 loaded.original_width,
                 loaded.original_height,
                 true,
                 w / loaded.original_width,
                 h / loaded.original_height,
                 placement.pad_x,
                 placement.pad_y};
  return sample;
}

// YOLOv5's load_mosaic: the 4-image canvas, copy-paste on it, and the random perspective that
// makes it imgsz x imgsz.
Image augmented_mosaic(const Dataset& dataset, int64_t index, int imgsz, const AugmentHyp& hyp,
                       SampleRng& rng, std::vector<PixelBox>& boxes) {
  std::vector<Polygon> segments;
  const Mosaic mosaic = build_mosaic(dataset, index, imgsz, rng, boxes, segments);
  if (hyp.copy_paste > 0) {  // pastes onto the canvas: drawn first
    Image canvas = mosaic.canvas.render();
    copy_paste(canvas, boxes, segments, hyp.copy_paste, rng);
    const StageTimer timer(Stage::warp);
    random_perspective(canvas, boxes, hyp, -imgsz / 2, rng, segments);
    return canvas;
  }
  const StageTimer timer(Stage::warp);
  return random_perspective(mosaic.canvas, boxes, hyp, -imgsz / 2, rng, segments);
}

void to_labels(const std::vector<PixelBox>& boxes, Sample& sample) {
  sample.labels.clear();
  for (const PixelBox& box : boxes)
    sample.labels.push_back(to_normalised(box, sample.image.width, sample.image.height));
}

}  // namespace

Sample make_train_sample(const Dataset& dataset, int64_t index, int imgsz, const AugmentHyp& hyp,
                         SampleRng& rng, std::optional<ImageSize> rect_canvas) {
  std::vector<PixelBox> boxes;
  Sample sample;
  if (!rect_canvas && rng.chance(hyp.mosaic)) {
    sample.image = augmented_mosaic(dataset, index, imgsz, hyp, rng, boxes);
    // YOLOv5 draws this chance even at mixup 0; here only when mixup is on, so that a run
    // without it draws what it drew before mixup existed.
    if (hyp.mixup > 0 && rng.chance(hyp.mixup)) {
      const int64_t partner = int64_t(rng.below(uint64_t(dataset.size())));
      std::vector<PixelBox> partner_boxes;
      const Image partner_image =
          augmented_mosaic(dataset, partner, imgsz, hyp, rng, partner_boxes);
      mix_up(sample.image, boxes, partner_image, partner_boxes, mixup_ratio(rng));
    }
  } else {
    const ImageSize canvas = rect_canvas.value_or(ImageSize{imgsz, imgsz});
    sample = letterboxed_sample(dataset, index, dataset.load(index, imgsz), canvas.width,
                                canvas.height, /*scale_up=*/true, boxes);
    random_perspective(sample.image, boxes, hyp, 0, rng);
  }
  // After the random warp there is no mapping back to the original (letterboxed = false).
  const ImageRecord& record = dataset.record(index);
  sample.meta = ImageMeta{record.path, record.width, record.height};
  to_labels(boxes, sample);
  {
    const StageTimer timer(Stage::hsv);
    augment_hsv(sample.image, hyp, rng);
  }
  const StageTimer timer(Stage::flip);
  bool up_down = rng.chance(hyp.flipud);
  bool left_right = rng.chance(hyp.fliplr);
  if (up_down) flip_up_down(sample.image, sample.labels);
  if (left_right) flip_left_right(sample.image, sample.labels);
  return sample;
}

Sample make_val_sample(const Dataset& dataset, int64_t index, int imgsz, int width, int height) {
  std::vector<PixelBox> boxes;
  Sample sample = letterboxed_sample(dataset, index, dataset.load(index, imgsz), width, height,
                                     /*scale_up=*/false, boxes);
  to_labels(boxes, sample);
  return sample;
}

void flip_left_right(Image& image, std::vector<LabelBox>& labels) {
  for (int y = 0; y < image.height; ++y) {
    uint8_t* row = image.row(y);
    for (int a = 0, b = image.width - 1; a < b; ++a, --b)
      std::swap_ranges(row + a * 3, row + a * 3 + 3, row + b * 3);
  }
  for (LabelBox& box : labels) box.cx = 1 - box.cx;
}

void flip_up_down(Image& image, std::vector<LabelBox>& labels) {
  for (int a = 0, b = image.height - 1; a < b; ++a, --b)
    std::swap_ranges(image.row(a), image.row(a) + size_t(image.width) * 3, image.row(b));
  for (LabelBox& box : labels) box.cy = 1 - box.cy;
}

}  // namespace bareyolo::data
