// data/verify.h — the verification pass over one split: every image decoded, every label
// file checked (label_file.h), in parallel, with the outcome in one report.
//
//  - an image that cannot be decoded, is smaller than 10 px on a side, or is in a format
//    stb_image cannot read is skipped and listed (counted as corrupt);
//  - an image whose label file has an error is skipped too (counted as corrupt), every bad
//    line listed with file:line;
//  - a missing or empty label file makes a background image.
// Summary line: "N images, M backgrounds, K corrupt, L labels" — N usable images (backgrounds
// included), L boxes on them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/label_file.h"

namespace bareyolo::data {

// One usable image: where it is, its size, its boxes.
struct ImageRecord {
  std::string path;
  int width = 0, height = 0;
  std::vector<LabelBox> boxes;
};

struct SplitReport {
  std::vector<ImageRecord> images;  // usable images, sorted by path
  int backgrounds = 0;
  int corrupt = 0;
  int64_t labels = 0;
  std::vector<Problem> problems;  // errors and warnings, in image order
  std::string summary() const;
};

// What a command says about a split before it trains or evaluates on it: a line counting the
// images skipped and the other warnings, then the first `shown` problems (file:line: what),
// then how many more `bareyolo data-check` lists. Empty when the split has no problem.
std::vector<std::string> problem_lines(const std::string& split, const SplitReport& report,
                                       size_t shown = 5);

// Smallest image side accepted (YOLOv5's rule).
inline constexpr int kMinImageSide = 10;

// Decodes every image and reads every label; `threads` <= 0 means one per core.
SplitReport verify_images(const std::vector<std::string>& image_files, int num_classes,
                          int threads = 0);

}  // namespace bareyolo::data
