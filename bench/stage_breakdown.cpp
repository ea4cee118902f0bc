// bench/stage_breakdown.cpp — see stage_breakdown.h.
#include "bench/stage_breakdown.h"

#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>

namespace bareyolo::bench {

namespace {

struct Stage {
  const char* key;    // its name in a YOLOV5_STAGES line, less "_ms"
  const char* label;  // its row in the table
  double StageBreakdown::*ms;
};

// The stages that are timed, in the table's order; other and total follow them.
constexpr Stage kTimedStages[] = {
    {"decode", "decode", &StageBreakdown::decode_ms},
    {"resize", "resize", &StageBreakdown::resize_ms},
    {"place", "mosaic placement", &StageBreakdown::place_ms},
    {"warp", "perspective warp", &StageBreakdown::warp_ms},
    {"hsv", "HSV", &StageBreakdown::hsv_ms},
    {"flip_letterbox", "flips, letterbox", &StageBreakdown::flip_letterbox_ms},
    {"batch", "copy into batch", &StageBreakdown::batch_ms},
};

// "<key>=<number>" words after the line's first, by key; nothing when a word is not one.
std::optional<std::map<std::string, double>> numbers_by_key(std::istringstream& words) {
  std::map<std::string, double> numbers;
  std::string word;
  while (words >> word) {
    const size_t equals = word.find('=');
    if (equals == std::string::npos || equals + 1 == word.size()) return std::nullopt;
    char* end = nullptr;
    numbers[word.substr(0, equals)] = std::strtod(word.c_str() + equals + 1, &end);
    if (*end != '\0') return std::nullopt;
  }
  return numbers;
}

std::string cell(const char* format, double value) {
  char text[32];
  std::snprintf(text, sizeof text, format, value);
  return text;
}

}  // namespace

double StageBreakdown::other_ms() const {
  double rest = total_ms;
  for (const Stage& stage : kTimedStages) rest -= this->*stage.ms;
  return rest;
}

std::optional<StageBreakdown> parse_yolov5_stages(const std::string& line) {
  std::istringstream words(line);
  std::string tag;
  if (!(words >> tag) || tag != "YOLOV5_STAGES") return std::nullopt;
  const std::optional<std::map<std::string, double>> numbers = numbers_by_key(words);
  if (!numbers || !numbers->count("samples") || !numbers->count("total_ms")) return std::nullopt;
  StageBreakdown stages;
  stages.samples = long(numbers->at("samples"));
  stages.total_ms = numbers->at("total_ms");
  for (const Stage& stage : kTimedStages) {
    const auto found = numbers->find(std::string(stage.key) + "_ms");
    if (found == numbers->end()) return std::nullopt;
    stages.*stage.ms = found->second;
  }
  if (stages.samples < 1) return std::nullopt;
  return stages;
}

void print_stage_table(const std::optional<StageBreakdown>& ours,
                       const std::optional<StageBreakdown>& yolov5) {
  if (!ours && !yolov5) return;
  auto samples = [](const std::optional<StageBreakdown>& side) {
    return side ? std::to_string(side->samples) + " samples" : std::string("not measured");
  };
  std::printf("where a sample's CPU time goes, ms per sample (ours: %s, yolov5: %s):\n",
              samples(ours).c_str(), samples(yolov5).c_str());
  std::printf("  %-18s %9s %9s %12s\n", "stage", "ours", "yolov5", "yolov5/ours");
  // `ms`: a side's milliseconds in the row's stage.
  auto row = [&](const char* label, auto ms) {
    auto time = [&](const std::optional<StageBreakdown>& side) {
      return side ? cell("%.3f", ms(*side)) : std::string("-");
    };
    const std::string ratio =
        ours && yolov5 && ms(*ours) > 0 ? cell("%.2f", ms(*yolov5) / ms(*ours)) : "-";
    std::printf("  %-18s %9s %9s %12s\n", label, time(ours).c_str(), time(yolov5).c_str(),
                ratio.c_str());
  };
  for (const Stage& stage : kTimedStages)
    row(stage.label, [&](const StageBreakdown& side) { return side.*stage.ms; });
  row("other", [](const StageBreakdown& side) { return side.other_ms(); });
  row("total", [](const StageBreakdown& side) { return side.total_ms; });
}

}  // namespace bareyolo::bench
