// data/label_file.h — one YOLO label file, one object per line, normalised to [0, 1]: a box
// `class cx cy w h`, or a polygon `class x1 y1 x2 y2 x3 y3 ...` (YOLOv5's segment format, at
// least 3 points), whose box is the polygon's extent and which is kept for copy-paste and the
// random perspective (docs/augmentation.md). A file may mix the two (YOLOv5 would read its box
// lines as 2-point polygons once one line is a polygon; here each line means what it says).
//
// Checked line by line; each problem names file:line, the value and what is wrong:
//  - neither 5 columns nor a polygon's odd count of at least 7, a value that is not a number,
//    NaN or Inf (strtof accepts "nan", and NaN passes any `< 0 || > 1` test, so finiteness is
//    checked first), a class that is not a whole number in [0, nc), a coordinate outside
//    [0, 1] by more than kCoordinateTolerance, a zero width or height (after the clamp: a box
//    without area; for a polygon, points spanning no width or height). Any of these makes the image
//    unusable: it is skipped, as YOLOv5 does (training on it with the bad object dropped would
//    teach the model that the object is background).
//  - exact duplicate rows are dropped with a warning (the first one is kept, in file order).
//  - a UTF-8 byte-order mark at the start of the file is skipped, with one warning naming it.
// Coordinates within the tolerance are clamped to [0, 1].
#pragma once

#include <string>
#include <vector>

namespace bareyolo::data {

// How far outside [0, 1] a coordinate may be and still be accepted (then clamped): float
// rounding in label exporters, about 0.6 px on a 640 px image.
inline constexpr float kCoordinateTolerance = 1e-3f;

struct LabelBox {
  int class_id = 0;
  float cx = 0, cy = 0, w = 0, h = 0;                 // normalised xywh
  auto operator<=>(const LabelBox&) const = default;  // finite values: a total order
};

// A polygon's vertex: normalised in a label file, in pixels during augmentation.
struct Point {
  float x = 0, y = 0;
  auto operator<=>(const Point&) const = default;
};
using Polygon = std::vector<Point>;

struct Problem {
  std::string file;
  int line = 0;  // 1-based; 0 when the problem is about the whole file
  std::string message;
  bool image_skipped = false;  // false: a warning, the image is used
  std::string to_string() const;
};

struct LabelFile {
  std::vector<LabelBox> boxes;
  // With a polygon line in the file: one per box, in the same order (empty for a box line);
  // else empty.
  std::vector<Polygon> segments;
  std::vector<Problem> problems;  // a missing file has neither boxes nor problems
  bool missing = false;           // there is no such file: a background image
  bool usable() const;            // no problem that skips the image
};

LabelFile parse_labels(const std::string& text, const std::string& file, int num_classes);
LabelFile read_label_file(const std::string& file, int num_classes);

}  // namespace bareyolo::data
