// data/verify.h — the verification pass over one split: every image decoded, every label
// file checked (label_file.h), in parallel, with the outcome in one report.
//
//  - an image that cannot be decoded, is smaller than 10 px on a side, or is in a format
//    stb_image cannot read is skipped and listed (counted as corrupt);
//  - an image whose label file has an error is skipped too (counted as corrupt), every bad
//    line listed with file:line;
//  - a missing or empty label file makes a background image.
//  - an image whose header claims more pixels than the limit is skipped before decoding.
// Summary line: "N images, M backgrounds, K corrupt, L labels" — N usable images (backgrounds
// included), L boxes on them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "data/image.h"  // defines: kDefaultMaxPixels
#include "data/label_file.h"

namespace bareyolo::data {

// One usable image: where it is, its size, its boxes (and their polygons, label_file.h).
struct ImageRecord {
  std::string path;
  int width = 0, height = 0;
  std::vector<LabelBox> boxes;
  std::vector<Polygon> segments = {};  // empty, or one per box (empty for a box line)
  int64_t pixels() const { return int64_t(width) * height; }
};

struct SplitReport {
  std::vector<ImageRecord> images;  // usable images, sorted by path
  int backgrounds = 0;
  int missing_label_files = 0;  // backgrounds because their label file does not exist
  int corrupt = 0;
  int64_t labels = 0;
  std::vector<Problem> problems;  // errors and warnings, in image order
  std::string summary() const;
};

// When the split's usable images carry no box at all, a warning named by the labels folder:
// why (no label file found, where they were looked for; or every label file empty) and what
// to do. verify_images puts it first among the problems; open_split refuses to train on such
// a split, as YOLOv5 does ("No labels found ... can not start training").
std::optional<Problem> no_labels_problem(const SplitReport& report);

// What a command says about a split before it trains or evaluates on it: a line counting the
// images skipped and the other warnings, then the first `shown` problems (file:line: what),
// then how many more `bareyolo data-check` lists. Empty when the split has no problem.
std::vector<std::string> problem_lines(const std::string& split, const SplitReport& report,
                                       size_t shown = 5);

// Smallest image side accepted (YOLOv5's rule).
inline constexpr int kMinImageSide = 10;

// Decodes every image and reads every label; `threads` <= 0 means one per core. An image of
// more than `max_pixels` pixels (0: no limit) is skipped, its size read before decoding.
SplitReport verify_images(const std::vector<std::string>& image_files, int num_classes,
                          int threads = 0, int64_t max_pixels = kDefaultMaxPixels);

}  // namespace bareyolo::data
