// data/perspective.h — YOLOv5's random_perspective: one random homography (centre, perspective,
// rotation + zoom, shear, translation), the image warped with it and the boxes moved with it.
//
// Output size: in + 2 * border per axis (the mosaic passes border = -imgsz/2, so its 2s x 2s
// canvas comes out s x s). Random draws, in this order (YOLOv5's): Px, Py, angle, zoom,
// shear-x, shear-y, Tx, Ty — all eight always drawn. M = T * S * R * P * C. The image is
// warped (bilinear, border 114) unless the border is 0 and M is the identity.
// Boxes: the four corners are transformed, their min/max taken and clipped to the output;
// boxes that no longer show their object (boxes.h: box_survives) are removed.
// Polygons (YOLOv5 takes this path when every box has one, as a polygon label file gives):
// each outline is resampled to 1000 points, transformed, and its new box is the extent of
// the points that land inside the output — tight around a rotated object, where the corners'
// box would grow; such a box survives with 1 % of its area kept (10 % for boxes).
#pragma once

#include <vector>

#include "data/augment_hyp.h"
#include "data/boxes.h"
#include "data/image.h"
#include "data/rng.h"
#include "data/warp.h"

namespace bareyolo::data {

inline constexpr uint8_t kPadValue = 114;  // YOLOv5's grey for letterbox, mosaic and warp borders

// The random matrix alone (exposed for tests); also returns the zoom it drew.
Mat3 random_perspective_matrix(const AugmentHyp& hyp, int in_width, int in_height, int out_width,
                               int out_height, SampleRng& rng, double& zoom);

// Transforms `boxes` by `m` into an out_width x out_height image and drops degenerate ones.
std::vector<PixelBox> transform_boxes(const std::vector<PixelBox>& boxes, const Mat3& m,
                                      double zoom, int out_width, int out_height);

// The same for boxes with polygons (`segments`, one per box, in pixels): boxes from the
// transformed outlines.
std::vector<PixelBox> transform_segments(const std::vector<PixelBox>& boxes,
                                         const std::vector<Polygon>& segments, const Mat3& m,
                                         double zoom, int out_width, int out_height);

// A random perspective drawn for an in_width x in_height image, with the boxes moved (by their
// polygons where every box has one) but the pixels not yet warped: the transform and the
// output size, (in_width + 2 border) x (in_height + 2 border), for warp() to render, so that
// the flips drawn after it fold into that warp (sample.cpp). `segments`: the boxes' polygons in
// pixels, one per box (an empty one for a box without); used when every box has one.
struct DrawnPerspective {
  Mat3 transform;
  int width = 0, height = 0;
};
DrawnPerspective draw_random_perspective(int in_width, int in_height, std::vector<PixelBox>& boxes,
                                         const AugmentHyp& hyp, int border, SampleRng& rng,
                                         const std::vector<Polygon>& segments = {});
// Drawn and rendered at once, in place.
void random_perspective(Image& image, std::vector<PixelBox>& boxes, const AugmentHyp& hyp,
                        int border, SampleRng& rng, const std::vector<Polygon>& segments = {});

}  // namespace bareyolo::data
