// data/label_file.h — one YOLO label file: `class cx cy w h` per line, normalised to [0, 1].
//
// Checked line by line; each problem names file:line, the value and what is wrong:
//  - not exactly 5 columns (polygon labels are not supported), a value that is not a number,
//    NaN or Inf (strtof accepts "nan", and NaN passes any `< 0 || > 1` test, so finiteness is
//    checked first), a class that is not a whole number in [0, nc), a coordinate outside
//    [0, 1] by more than kCoordinateTolerance, a zero width or height (after the clamp: a box
//    without area). Any of these makes the image unusable: it is skipped, as YOLOv5 does
//    (training on it with the bad object dropped would teach the model that the object is
//    background).
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

struct Problem {
  std::string file;
  int line = 0;  // 1-based; 0 when the problem is about the whole file
  std::string message;
  bool image_skipped = false;  // false: a warning, the image is used
  std::string to_string() const;
};

struct LabelFile {
  std::vector<LabelBox> boxes;
  std::vector<Problem> problems;  // a missing file has neither boxes nor problems
  bool missing = false;           // there is no such file: a background image
  bool usable() const;            // no problem that skips the image
};

LabelFile parse_labels(const std::string& text, const std::string& file, int num_classes);
LabelFile read_label_file(const std::string& file, int num_classes);

}  // namespace bareyolo::data
