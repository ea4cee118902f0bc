// fuzz/label_cache.cpp — fuzz target: a label cache's JSON (data/label_cache_json.h), which anyone
// can edit or damage: whatever parse_label_cache accepts must be what verify_images could have
// written, since the loader indexes by its classes and divides by its sizes.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "data/label_cache_json.h"

namespace {

// What the seed corpus's caches carry (fuzz/corpus/label_cache/).
constexpr const char* kFingerprint = "5eedcafe5eedcafe";
constexpr int kClasses = 3;

bool unit(float v) { return std::isfinite(v) && v >= 0 && v <= 1; }

bool plausible(const bareyolo::data::LabelBox& box) {
  return box.class_id >= 0 && box.class_id < kClasses && unit(box.cx) && unit(box.cy) &&
         unit(box.w) && unit(box.h) && box.w > 0 && box.h > 0;
}

// No polygon (a box line) or at least 3 normalised points.
bool plausible(const bareyolo::data::Polygon& polygon) {
  if (!polygon.empty() && polygon.size() < 3) return false;
  for (const bareyolo::data::Point& p : polygon)
    if (!unit(p.x) || !unit(p.y)) return false;
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const std::optional<bareyolo::data::SplitReport> report =
      bareyolo::data::parse_label_cache(text, kFingerprint, kClasses);
  if (!report) return 0;
  for (const bareyolo::data::ImageRecord& image : report->images) {
    if (image.width <= 0 || image.height <= 0) __builtin_trap();
    for (const bareyolo::data::LabelBox& box : image.boxes)
      if (!plausible(box)) __builtin_trap();
    if (!image.segments.empty() && image.segments.size() != image.boxes.size()) __builtin_trap();
    for (const bareyolo::data::Polygon& polygon : image.segments)
      if (!plausible(polygon)) __builtin_trap();
  }
  if (report->backgrounds < 0 || report->corrupt < 0 || report->labels < 0) __builtin_trap();
  return 0;
}
