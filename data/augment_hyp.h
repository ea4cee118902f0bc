// data/augment_hyp.h — the augmentation hyperparameters, defaulting to YOLOv5's
// hyp.scratch-low.yaml (the default --hyp). Probabilities are in [0, 1]; degrees and shear in
// degrees; translate and scale as fractions of the image.
#pragma once

namespace bareyolo::data {

struct AugmentHyp {
  double hsv_h = 0.015;  // hue gain: H scaled by U(1 - hsv_h, 1 + hsv_h)
  double hsv_s = 0.7;    // saturation gain
  double hsv_v = 0.4;    // value gain
  double degrees = 0.0;  // rotation, +/- degrees
  double translate = 0.1;
  double scale = 0.5;        // zoom U(1 - scale, 1 + scale)
  double shear = 0.0;        // +/- degrees
  double perspective = 0.0;  // 0 = affine only
  double flipud = 0.0;       // probability of an up-down flip
  double fliplr = 0.5;       // probability of a left-right flip
  double mosaic = 1.0;       // probability of a 4-image mosaic
  double mixup = 0.0;        // probability of blending a mosaic with a second one (mixup.h)
  double copy_paste = 0.0;   // share of a mosaic's objects mirrored and pasted (copy_paste.h)
};

}  // namespace bareyolo::data
