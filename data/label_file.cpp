// data/label_file.cpp — parsing and checking one label file (rules in label_file.h).
#include "data/label_file.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <set>
#include <sstream>

#include "data/regular_file.h"

namespace bareyolo::data {

namespace {

constexpr const char* kBoxColumns[5] = {"class", "cx", "cy", "w", "h"};
constexpr const char* kUtf8ByteOrderMark = "\xEF\xBB\xBF";

// One line's object: its box and, for a polygon line, its outline (the box is its extent).
struct LabelObject {
  LabelBox box;
  Polygon polygon;
  auto operator<=>(const LabelObject&) const = default;
};

std::vector<std::string> split_fields(const std::string& line) {
  std::istringstream stream(line);
  std::vector<std::string> fields;
  for (std::string field; stream >> field;) fields.push_back(field);
  return fields;
}

// "cx" for a box's column 1; "x1", "y1", "x2", ... for a polygon's columns 1, 2, 3, ...
std::string column_name(size_t column, bool polygon) {
  if (column == 0 || !polygon) return kBoxColumns[column];
  return (column % 2 ? "x" : "y") + std::to_string((column + 1) / 2);
}

// The polygon's extent as a box, as YOLOv5's segments2boxes makes it (in float).
LabelBox extent_box(int class_id, const Polygon& polygon) {
  auto [x_min, x_max] = std::minmax_element(polygon.begin(), polygon.end(),
                                            [](Point a, Point b) { return a.x < b.x; });
  auto [y_min, y_max] = std::minmax_element(polygon.begin(), polygon.end(),
                                            [](Point a, Point b) { return a.y < b.y; });
  return {class_id, (x_min->x + x_max->x) / 2, (y_min->y + y_max->y) / 2, x_max->x - x_min->x,
          y_max->y - y_min->y};
}

// Returns an empty string when the line is good, else what is wrong with it.
std::string parse_line(const std::vector<std::string>& fields, int num_classes,
                       LabelObject& object) {
  const size_t columns = fields.size();
  const bool polygon = columns >= 7 && columns % 2 == 1;
  if (columns != 5 && !polygon)
    return "expected 5 columns (class cx cy w h) or a polygon (class x1 y1 x2 y2 x3 y3 ..., an "
           "odd count of at least 7), found " +
           std::to_string(columns);
  std::vector<float> values(columns);
  for (size_t i = 0; i < columns; ++i) {
    const std::string& text = fields[i];
    char* end = nullptr;
    errno = 0;
    values[i] = std::strtof(text.c_str(), &end);
    if (end == text.c_str() || *end != '\0')
      return column_name(i, polygon) + " '" + text + "' is not a number";
    if (!std::isfinite(values[i]))
      return column_name(i, polygon) + " is '" + text + "', which is not a finite number";
  }
  float cls = values[0];
  if (cls != std::floor(cls) || cls < 0)
    return "class '" + fields[0] + "' is not a whole number >= 0";
  if (cls >= static_cast<float>(num_classes))
    return "class " + fields[0] +
           " is out of range: the dataset has nc=" + std::to_string(num_classes) + " classes (0.." +
           std::to_string(num_classes - 1) + "); fix the label or the yaml's names";
  for (size_t i = 1; i < columns; ++i) {
    if (values[i] < -kCoordinateTolerance || values[i] > 1 + kCoordinateTolerance)
      return column_name(i, polygon) + " = " + fields[i] +
             " is outside [0, 1]: coordinates must be normalised by the image size";
    values[i] = std::clamp(values[i], 0.0f, 1.0f);
  }
  const int class_id = static_cast<int>(cls);
  if (!polygon) {
    for (size_t i = 3; i < 5; ++i)
      if (values[i] == 0)
        return column_name(i, polygon) + " = " + fields[i] +
               " makes a zero-size box: a box's width and height must be > 0";
    object = {LabelBox{class_id, values[1], values[2], values[3], values[4]}, {}};
    return {};
  }
  object.polygon.clear();
  for (size_t i = 1; i < columns; i += 2) object.polygon.push_back({values[i], values[i + 1]});
  object.box = extent_box(class_id, object.polygon);
  if (object.box.w == 0 || object.box.h == 0)
    return std::string("the polygon's points span zero ") +
           (object.box.w == 0 ? "width" : "height") + ": an object's outline must enclose an area";
  return {};
}

}  // namespace

std::string Problem::to_string() const {
  std::string where = line > 0 ? file + ":" + std::to_string(line) : file;
  return where + ": " + message + (image_skipped ? " (image skipped)" : "");
}

bool LabelFile::usable() const {
  return std::none_of(problems.begin(), problems.end(),
                      [](const Problem& p) { return p.image_skipped; });
}

LabelFile parse_labels(const std::string& text, const std::string& file, int num_classes) {
  LabelFile result;
  std::set<LabelObject> seen;  // duplicates in n log n: a label file may hold millions of rows
  std::istringstream lines(text);
  if (text.starts_with(kUtf8ByteOrderMark)) {
    // Editors on Windows save one; left in, it would glue itself to the first class id.
    lines.ignore(std::char_traits<char>::length(kUtf8ByteOrderMark));
    result.problems.push_back(
        {file, 0,
         "starts with a UTF-8 byte-order mark, ignored (saving it without one silences "
         "this)",
         false});
  }
  std::string line;
  bool has_polygon = false;
  for (int number = 1; std::getline(lines, line); ++number) {
    std::vector<std::string> fields = split_fields(line);
    if (fields.empty()) continue;
    LabelObject object;
    std::string error = parse_line(fields, num_classes, object);
    if (!error.empty()) {
      result.problems.push_back({file, number, error, true});
    } else if (!seen.insert(object).second) {
      result.problems.push_back({file, number, "duplicate of an earlier row, dropped", false});
    } else {
      result.boxes.push_back(object.box);
      if (!object.polygon.empty() && !has_polygon) {  // the box lines before it have none
        has_polygon = true;
        result.segments.resize(result.boxes.size() - 1);
      }
      if (has_polygon) result.segments.push_back(std::move(object.polygon));
    }
  }
  return result;
}

LabelFile read_label_file(const std::string& file, int num_classes) {
  const FileContents contents = read_regular_file(file);
  if (contents.kind == FileContents::regular)
    return parse_labels(contents.bytes, file, num_classes);
  LabelFile result;  // no label file: a background image
  result.missing = contents.kind == FileContents::missing;
  if (!result.missing)
    result.problems.push_back({file, 0, "label file cannot be read: " + contents.error, true});
  return result;
}

}  // namespace bareyolo::data
