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

constexpr const char* kColumnNames[5] = {"class", "cx", "cy", "w", "h"};
constexpr const char* kUtf8ByteOrderMark = "\xEF\xBB\xBF";

std::vector<std::string> split_fields(const std::string& line) {
  std::istringstream stream(line);
  std::vector<std::string> fields;
  for (std::string field; stream >> field;) fields.push_back(field);
  return fields;
}

// Returns an empty string when the line is good, else what is wrong with it.
std::string parse_line(const std::vector<std::string>& fields, int num_classes, LabelBox& box) {
  if (fields.size() != 5)
    return "expected 5 columns (class cx cy w h), found " + std::to_string(fields.size()) +
           (fields.size() > 5 ? " (polygon labels are not supported)" : "");
  float values[5];
  for (int i = 0; i < 5; ++i) {
    const std::string& text = fields[size_t(i)];
    char* end = nullptr;
    errno = 0;
    values[i] = std::strtof(text.c_str(), &end);
    if (end == text.c_str() || *end != '\0')
      return std::string(kColumnNames[i]) + " '" + text + "' is not a number";
    if (!std::isfinite(values[i]))
      return std::string(kColumnNames[i]) + " is '" + text + "', which is not a finite number";
  }
  float cls = values[0];
  if (cls != std::floor(cls) || cls < 0)
    return "class '" + fields[0] + "' is not a whole number >= 0";
  if (cls >= static_cast<float>(num_classes))
    return "class " + fields[0] +
           " is out of range: the dataset has nc=" + std::to_string(num_classes) + " classes (0.." +
           std::to_string(num_classes - 1) + "); fix the label or the yaml's names";
  for (int i = 1; i < 5; ++i) {
    if (values[i] < -kCoordinateTolerance || values[i] > 1 + kCoordinateTolerance)
      return std::string(kColumnNames[i]) + " = " + fields[size_t(i)] +
             " is outside [0, 1]: coordinates must be normalised by the image size";
    values[i] = std::clamp(values[i], 0.0f, 1.0f);
  }
  for (int i = 3; i < 5; ++i)
    if (values[i] == 0)
      return std::string(kColumnNames[i]) + " = " + fields[size_t(i)] +
             " makes a zero-size box: a box's width and height must be > 0";
  box = LabelBox{static_cast<int>(cls), values[1], values[2], values[3], values[4]};
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
  std::set<LabelBox> seen;  // duplicates in n log n: a label file may hold millions of rows
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
  for (int number = 1; std::getline(lines, line); ++number) {
    std::vector<std::string> fields = split_fields(line);
    if (fields.empty()) continue;
    LabelBox box;
    std::string error = parse_line(fields, num_classes, box);
    if (!error.empty()) {
      result.problems.push_back({file, number, error, true});
    } else if (!seen.insert(box).second) {
      result.problems.push_back({file, number, "duplicate of an earlier row, dropped", false});
    } else {
      result.boxes.push_back(box);
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
