// data/perspective.cpp — random_perspective (see perspective.h).
#include "data/perspective.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace bareyolo::data {

namespace {

double radians(double degrees) { return degrees * std::numbers::pi / 180.0; }

}  // namespace

Mat3 random_perspective_matrix(const AugmentHyp& hyp, int in_width, int in_height, int out_width,
                               int out_height, SampleRng& rng, double& zoom) {
  Mat3 centre;
  centre(0, 2) = -in_width / 2.0;
  centre(1, 2) = -in_height / 2.0;

  Mat3 perspective;
  perspective(2, 0) = rng.uniform(-hyp.perspective, hyp.perspective);
  perspective(2, 1) = rng.uniform(-hyp.perspective, hyp.perspective);

  double angle = radians(rng.uniform(-hyp.degrees, hyp.degrees));
  zoom = rng.uniform(1 - hyp.scale, 1 + hyp.scale);
  Mat3 rotation;  // OpenCV's getRotationMatrix2D about the origin (y points down)
  rotation(0, 0) = zoom * std::cos(angle), rotation(0, 1) = zoom * std::sin(angle);
  rotation(1, 0) = -zoom * std::sin(angle), rotation(1, 1) = zoom * std::cos(angle);

  Mat3 shear;
  shear(0, 1) = std::tan(radians(rng.uniform(-hyp.shear, hyp.shear)));
  shear(1, 0) = std::tan(radians(rng.uniform(-hyp.shear, hyp.shear)));

  Mat3 translation;
  translation(0, 2) = rng.uniform(0.5 - hyp.translate, 0.5 + hyp.translate) * out_width;
  translation(1, 2) = rng.uniform(0.5 - hyp.translate, 0.5 + hyp.translate) * out_height;

  return translation * shear * rotation * perspective * centre;
}

std::vector<PixelBox> transform_boxes(const std::vector<PixelBox>& boxes, const Mat3& m,
                                      double zoom, int out_width, int out_height) {
  std::vector<PixelBox> kept;
  for (const PixelBox& box : boxes) {
    const double corners[4][2] = {
        {box.x1, box.y1}, {box.x2, box.y2}, {box.x1, box.y2}, {box.x2, box.y1}};
    double x_min = INFINITY, y_min = INFINITY, x_max = -INFINITY, y_max = -INFINITY;
    for (const auto& [x, y] : corners) {
      double w = m(2, 0) * x + m(2, 1) * y + m(2, 2);
      double tx = (m(0, 0) * x + m(0, 1) * y + m(0, 2)) / w;
      double ty = (m(1, 0) * x + m(1, 1) * y + m(1, 2)) / w;
      x_min = std::min(x_min, tx), x_max = std::max(x_max, tx);
      y_min = std::min(y_min, ty), y_max = std::max(y_max, ty);
    }
    PixelBox moved{box.class_id, float(std::clamp(x_min, 0.0, double(out_width))),
                   float(std::clamp(y_min, 0.0, double(out_height))),
                   float(std::clamp(x_max, 0.0, double(out_width))),
                   float(std::clamp(y_max, 0.0, double(out_height)))};
    PixelBox zoomed{box.class_id, float(box.x1 * zoom), float(box.y1 * zoom), float(box.x2 * zoom),
                    float(box.y2 * zoom)};
    if (box_survives(zoomed, moved)) kept.push_back(moved);
  }
  return kept;
}

void random_perspective(Image& image, std::vector<PixelBox>& boxes, const AugmentHyp& hyp,
                        int border, SampleRng& rng) {
  int out_width = image.width + 2 * border, out_height = image.height + 2 * border;
  double zoom = 1;
  Mat3 m =
      random_perspective_matrix(hyp, image.width, image.height, out_width, out_height, rng, zoom);
  if (border != 0 || !m.is_identity()) image = warp(image, m, out_width, out_height, kPadValue);
  boxes = transform_boxes(boxes, m, zoom, out_width, out_height);
}

}  // namespace bareyolo::data
