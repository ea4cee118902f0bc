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

// A training image drawn but not yet rendered: the canvas its random perspective samples (a
// mosaic's four tiles, or one image: the canvas copy-paste drew on, or the letterboxed image)
// and that perspective. YOLOv5 flips last, after the HSV gains are drawn; the flips are
// drawn in that order and then folded into the warp that renders the image, so each pixel is
// written once.
struct DrawnImage {
  Mosaic mosaic;  // holds the canvas's tiles when it is a mosaic's
  Image image;    // holds the canvas's pixels when it is one image
  TiledCanvas canvas;
  DrawnPerspective perspective;

  Image render(Flips flips) const {
    const StageTimer timer(Stage::warp);
    return warp(canvas, perspective.transform, perspective.width, perspective.height, flips);
  }
};

// YOLOv5's load_mosaic: the 4-image canvas, copy-paste on it, and the random perspective that
// makes it imgsz x imgsz.
DrawnImage drawn_mosaic(const Dataset& dataset, int64_t index, int imgsz, const AugmentHyp& hyp,
                        SampleRng& rng, std::vector<PixelBox>& boxes) {
  std::vector<Polygon> segments;
  DrawnImage drawn;
  drawn.mosaic = build_mosaic(dataset, index, imgsz, rng, boxes, segments);
  drawn.canvas = drawn.mosaic.canvas;
  if (hyp.copy_paste > 0) {  // pastes onto the canvas: drawn first
    drawn.image = drawn.canvas.render();
    copy_paste(drawn.image, boxes, segments, hyp.copy_paste, rng);
    drawn.canvas = TiledCanvas::of(drawn.image, kPadValue);
  }
  drawn.perspective = draw_random_perspective(drawn.canvas.width, drawn.canvas.height, boxes, hyp,
                                              -imgsz / 2, rng, segments);
  return drawn;
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
  DrawnImage drawn;
  struct Partner {  // mixup's second mosaic
    DrawnImage drawn;
    std::vector<PixelBox> boxes;
    double ratio = 0;
  };
  std::optional<Partner> partner;
  if (!rect_canvas && rng.chance(hyp.mosaic)) {
    drawn = drawn_mosaic(dataset, index, imgsz, hyp, rng, boxes);
    // YOLOv5 draws this chance even at mixup 0; here only when mixup is on, so that a run
    // without it draws what it drew before mixup existed.
    if (hyp.mixup > 0 && rng.chance(hyp.mixup)) {
      partner.emplace();
      const int64_t other = int64_t(rng.below(uint64_t(dataset.size())));
      partner->drawn = drawn_mosaic(dataset, other, imgsz, hyp, rng, partner->boxes);
      partner->ratio = mixup_ratio(rng);
    }
  } else {
    const ImageSize canvas = rect_canvas.value_or(ImageSize{imgsz, imgsz});
    drawn.image = letterboxed_sample(dataset, index, dataset.load(index, imgsz), canvas.width,
                                     canvas.height, /*scale_up=*/true, boxes)
                      .image;
    drawn.canvas = TiledCanvas::of(drawn.image, kPadValue);
    drawn.perspective =
        draw_random_perspective(drawn.canvas.width, drawn.canvas.height, boxes, hyp, 0, rng);
  }
  const HsvJitter jitter = draw_hsv_jitter(hyp, rng);
  Flips flips;
  flips.up_down = rng.chance(hyp.flipud);
  flips.left_right = rng.chance(hyp.fliplr);

  Sample sample;
  sample.image = drawn.render(flips);
  if (partner)
    mix_up(sample.image, boxes, partner->drawn.render(flips), partner->boxes, partner->ratio);
  // After the random warp there is no mapping back to the original (letterboxed = false).
  const ImageRecord& record = dataset.record(index);
  sample.meta = ImageMeta{record.path, record.width, record.height};
  to_labels(boxes, sample);
  for (LabelBox& label : sample.labels) {
    if (flips.up_down) label.cy = 1 - label.cy;
    if (flips.left_right) label.cx = 1 - label.cx;
  }
  const StageTimer timer(Stage::hsv);
  apply_hsv_jitter(sample.image, jitter);
  return sample;
}

Sample make_val_sample(const Dataset& dataset, int64_t index, int imgsz, int width, int height) {
  std::vector<PixelBox> boxes;
  Sample sample = letterboxed_sample(dataset, index, dataset.load(index, imgsz), width, height,
                                     /*scale_up=*/false, boxes);
  to_labels(boxes, sample);
  return sample;
}

}  // namespace bareyolo::data
