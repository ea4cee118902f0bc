// data/label_cache_json.cpp — see label_cache_json.h.
#include "data/label_cache_json.h"

#include <nlohmann/json.hpp>

#include <limits>
#include <stdexcept>

#include "engine/json_number.h"  // defines: json_whole_number

using nlohmann::json;

namespace bareyolo::data {

namespace {

json to_json(const SplitReport& report, const std::string& fingerprint) {
  json images = json::array();
  for (const ImageRecord& record : report.images) {
    json boxes = json::array();
    for (const LabelBox& b : record.boxes) boxes.push_back({b.class_id, b.cx, b.cy, b.w, b.h});
    json image = {record.path, record.width, record.height, std::move(boxes)};
    if (!record.segments.empty()) {  // polygons as flat x y lists, one per box
      json segments = json::array();
      for (const Polygon& polygon : record.segments) {
        json flat = json::array();
        for (const Point& p : polygon) flat.push_back(p.x), flat.push_back(p.y);
        segments.push_back(std::move(flat));
      }
      image.push_back(std::move(segments));
    }
    images.push_back(std::move(image));
  }
  json problems = json::array();
  for (const Problem& p : report.problems)
    problems.push_back({p.file, p.line, p.message, p.image_skipped});
  return {{"version", kLabelCacheVersion},
          {"fingerprint", fingerprint},
          {"backgrounds", report.backgrounds},
          {"corrupt", report.corrupt},
          {"missing_label_files", report.missing_label_files},
          {"labels", report.labels},
          {"images", std::move(images)},
          {"problems", std::move(problems)}};
}

// A value verify_images could not have written: the cache is damaged or edited.
class ImplausibleCache : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

int64_t whole_number(const json& value, int64_t low, int64_t high) {
  return json_whole_number(value, low, high, "a label cache's number");
}

// A normalised coordinate in [0, 1]: what label_file.cpp keeps of a label's column.
float coordinate(const json& value) {
  const double number = value.get<double>();  // any JSON number; a string throws
  if (!(number >= 0 && number <= 1)) throw ImplausibleCache("a coordinate outside [0, 1]");
  return static_cast<float>(number);
}

LabelBox box_from_json(const json& b, int num_classes) {
  if (b.size() != 5) throw ImplausibleCache("a box without 5 values");
  const LabelBox box{static_cast<int>(whole_number(b.at(0), 0, num_classes - 1)),
                     coordinate(b.at(1)), coordinate(b.at(2)), coordinate(b.at(3)),
                     coordinate(b.at(4))};
  if (box.w == 0 || box.h == 0) throw ImplausibleCache("a zero-size box");
  return box;
}

// One box's polygon: empty (a box line) or at least 3 normalised points.
Polygon polygon_from_json(const json& flat) {
  if (flat.size() % 2 != 0 || flat.size() == 2 || flat.size() == 4)
    throw ImplausibleCache("a polygon that is not 3 or more x y pairs");
  Polygon polygon;
  for (size_t i = 0; i < flat.size(); i += 2)
    polygon.push_back({coordinate(flat.at(i)), coordinate(flat.at(i + 1))});
  return polygon;
}

SplitReport from_json(const json& doc, int num_classes) {
  constexpr int64_t kMaxInt = std::numeric_limits<int>::max();
  SplitReport report;
  report.backgrounds = static_cast<int>(whole_number(doc.at("backgrounds"), 0, kMaxInt));
  report.corrupt = static_cast<int>(whole_number(doc.at("corrupt"), 0, kMaxInt));
  report.missing_label_files =
      static_cast<int>(whole_number(doc.at("missing_label_files"), 0, kMaxInt));
  report.labels = whole_number(doc.at("labels"), 0, INT64_MAX);
  for (const json& item : doc.at("images")) {
    ImageRecord record{item.at(0).get<std::string>(),
                       static_cast<int>(whole_number(item.at(1), 1, kMaxInt)),
                       static_cast<int>(whole_number(item.at(2), 1, kMaxInt)),
                       {}};
    for (const json& b : item.at(3)) record.boxes.push_back(box_from_json(b, num_classes));
    if (item.size() > 4) {
      for (const json& flat : item.at(4)) record.segments.push_back(polygon_from_json(flat));
      if (record.segments.size() != record.boxes.size())
        throw ImplausibleCache("a polygon count that is not the box count");
    }
    report.images.push_back(std::move(record));
  }
  for (const json& p : doc.at("problems"))
    report.problems.push_back({p.at(0).get<std::string>(),
                               static_cast<int>(whole_number(p.at(1), 0, kMaxInt)),
                               p.at(2).get<std::string>(), p.at(3).get<bool>()});
  return report;
}

}  // namespace

std::string label_cache_json(const SplitReport& report, const std::string& fingerprint) {
  return to_json(report, fingerprint).dump();
}

std::optional<SplitReport> parse_label_cache(const std::string& text,
                                             const std::string& fingerprint, int num_classes) {
  const json doc = json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) return std::nullopt;
  try {
    if (whole_number(doc.at("version"), 0, INT64_MAX) != kLabelCacheVersion ||
        doc.at("fingerprint").get<std::string>() != fingerprint)
      return std::nullopt;
    return from_json(doc, num_classes);
  } catch (const json::exception&) {
    return std::nullopt;                    // damaged or foreign: rebuilt by the caller
  } catch (const std::invalid_argument&) {  // json_whole_number's, ImplausibleCache
    return std::nullopt;
  }
}

}  // namespace bareyolo::data
