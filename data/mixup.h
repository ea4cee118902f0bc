// data/mixup.h — YOLOv5's MixUp (Zhang et al., https://arxiv.org/abs/1710.09412) of two finished
// mosaics of the same size: every byte becomes r * a + (1 - r) * b, computed in double and cut
// to a whole byte toward zero (YOLOv5 blends its uint8 images in float64 and casts back), and
// the labels are both images' boxes, this image's first. r ~ Beta(32, 32): mean 1/2,
// standard deviation 0.062, so both images stay about equally visible.
#pragma once

#include <vector>

#include "data/boxes.h"
#include "data/image.h"
#include "data/rng.h"

namespace bareyolo::data {

// YOLOv5's ratio: Beta(32, 32).
double mixup_ratio(SampleRng& rng);

// Blends `other` into `image` with `ratio` for `image` (both the same size) and appends
// `other_boxes` to `boxes`.
void mix_up(Image& image, std::vector<PixelBox>& boxes, const Image& other,
            const std::vector<PixelBox>& other_boxes, double ratio);

}  // namespace bareyolo::data
