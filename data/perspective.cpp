// data/perspective.cpp — random_perspective (see perspective.h).
#include "data/perspective.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace bareyolo::data {

namespace {

double radians(double degrees) { return degrees * std::numbers::pi / 180.0; }

struct Transformed {
  double x, y;
};
Transformed transform(const Mat3& m, double x, double y) {
  double w = m(2, 0) * x + m(2, 1) * y + m(2, 2);
  return {(m(0, 0) * x + m(0, 1) * y + m(0, 2)) / w, (m(1, 0) * x + m(1, 1) * y + m(1, 2)) / w};
}

// YOLOv5's resample_segments: `count` points evenly spaced along the closed outline's vertex
// index (0 at the first vertex, size() back at it), linearly interpolated between vertices, so
// that an edge crossing the image border still leaves points on the inside part.
std::vector<Transformed> resample_outline(const Polygon& polygon, int count) {
  const size_t edges = polygon.size();
  const double step = double(edges) / (count - 1);
  std::vector<Transformed> points;
  points.reserve(size_t(count));
  for (int k = 0; k < count; ++k) {
    const double t = k == count - 1 ? double(edges) : k * step;
    const size_t i = std::min(size_t(t), edges - 1);
    const Point& a = polygon[i];
    const Point& b = polygon[(i + 1) % edges];
    const double f = t - double(i);
    points.push_back({a.x + (double(b.x) - a.x) * f, a.y + (double(b.y) - a.y) * f});
  }
  return points;
}

bool every_box_has_a_polygon(const std::vector<PixelBox>& boxes,
                             const std::vector<Polygon>& segments) {
  return !boxes.empty() && segments.size() == boxes.size() &&
         std::none_of(segments.begin(), segments.end(),
                      [](const Polygon& polygon) { return polygon.empty(); });
}

PixelBox zoomed(const PixelBox& box, double zoom) {
  return {box.class_id, float(box.x1 * zoom), float(box.y1 * zoom), float(box.x2 * zoom),
          float(box.y2 * zoom)};
}

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
      const auto [tx, ty] = transform(m, x, y);
      x_min = std::min(x_min, tx), x_max = std::max(x_max, tx);
      y_min = std::min(y_min, ty), y_max = std::max(y_max, ty);
    }
    PixelBox moved{box.class_id, float(std::clamp(x_min, 0.0, double(out_width))),
                   float(std::clamp(y_min, 0.0, double(out_height))),
                   float(std::clamp(x_max, 0.0, double(out_width))),
                   float(std::clamp(y_max, 0.0, double(out_height)))};
    if (box_survives(zoomed(box, zoom), moved)) kept.push_back(moved);
  }
  return kept;
}

std::vector<PixelBox> transform_segments(const std::vector<PixelBox>& boxes,
                                         const std::vector<Polygon>& segments, const Mat3& m,
                                         double zoom, int out_width, int out_height) {
  constexpr int kOutlinePoints = 1000;   // YOLOv5's resample_segments
  constexpr float kMinAreaKept = 0.01f;  // YOLOv5's area_thr with segments
  std::vector<PixelBox> kept;
  for (size_t i = 0; i < boxes.size(); ++i) {
    double x_min = INFINITY, y_min = INFINITY, x_max = -INFINITY, y_max = -INFINITY;
    for (const Transformed& p : resample_outline(segments[i], kOutlinePoints)) {
      const auto [x, y] = transform(m, p.x, p.y);
      if (x < 0 || y < 0 || x > out_width || y > out_height) continue;  // not clipped: left out
      x_min = std::min(x_min, x), x_max = std::max(x_max, x);
      y_min = std::min(y_min, y), y_max = std::max(y_max, y);
    }
    PixelBox moved{boxes[i].class_id};  // no point inside: an empty box, which is dropped
    if (x_min <= x_max)
      moved = {boxes[i].class_id, float(x_min), float(y_min), float(x_max), float(y_max)};
    if (box_survives(zoomed(boxes[i], zoom), moved, kMinAreaKept)) kept.push_back(moved);
  }
  return kept;
}

DrawnPerspective draw_random_perspective(int in_width, int in_height, std::vector<PixelBox>& boxes,
                                         const AugmentHyp& hyp, int border, SampleRng& rng,
                                         const std::vector<Polygon>& segments) {
  DrawnPerspective drawn{{}, in_width + 2 * border, in_height + 2 * border};
  double zoom = 1;
  drawn.transform =
      random_perspective_matrix(hyp, in_width, in_height, drawn.width, drawn.height, rng, zoom);
  boxes =
      every_box_has_a_polygon(boxes, segments)
          ? transform_segments(boxes, segments, drawn.transform, zoom, drawn.width, drawn.height)
          : transform_boxes(boxes, drawn.transform, zoom, drawn.width, drawn.height);
  return drawn;
}

void random_perspective(Image& image, std::vector<PixelBox>& boxes, const AugmentHyp& hyp,
                        int border, SampleRng& rng, const std::vector<Polygon>& segments) {
  const DrawnPerspective drawn =
      draw_random_perspective(image.width, image.height, boxes, hyp, border, rng, segments);
  image = warp(image, drawn.transform, drawn.width, drawn.height, kPadValue);
}

}  // namespace bareyolo::data
