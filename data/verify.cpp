// data/verify.cpp — the parallel verification pass (see verify.h).
#include "data/verify.h"

#include <algorithm>
#include <filesystem>
#include <optional>

#include "data/image.h"
#include "data/image_files.h"
#include "data/parallel_for.h"

namespace bareyolo::data {

namespace fs = std::filesystem;

namespace {

// What one worker finds about one image.
struct Finding {
  ImageRecord record;
  LabelFile labels;
  bool image_ok = false;
};

Finding check_image(const std::string& path, int num_classes, int64_t max_pixels) {
  Finding finding;
  finding.record.path = path;
  try {
    Image image = read_image(path, max_pixels);
    finding.record.width = image.width;
    finding.record.height = image.height;
    if (image.width < kMinImageSide || image.height < kMinImageSide)
      finding.labels.problems.push_back({path, 0,
                                         "image is " + std::to_string(image.width) + "x" +
                                             std::to_string(image.height) + ", smaller than " +
                                             std::to_string(kMinImageSide) + " px on a side",
                                         true});
    else
      finding.image_ok = true;
  } catch (const ImageError& error) {
    finding.labels.problems.push_back({path, 0, "unreadable image: " + error.reason, true});
  }
  if (finding.image_ok) {
    LabelFile labels = read_label_file(label_path_for(path), num_classes);
    finding.record.boxes = labels.boxes;
    finding.record.segments = labels.segments;
    finding.labels = std::move(labels);
  }
  return finding;
}

}  // namespace

std::string SplitReport::summary() const {
  return std::to_string(images.size()) + " images, " + std::to_string(backgrounds) +
         " backgrounds, " + std::to_string(corrupt) + " corrupt, " + std::to_string(labels) +
         " labels";
}

std::optional<Problem> no_labels_problem(const SplitReport& report) {
  if (report.images.empty() || report.labels > 0) return std::nullopt;
  // Named by the folder of the first image's label, with the rule that maps one to the other.
  const std::string& image = report.images.front().path;
  const std::string label = label_path_for(image);
  const fs::path folder = fs::path(label).parent_path();
  const std::string count = std::to_string(report.images.size()) + " usable images";
  if (report.missing_label_files < int(report.images.size()))
    return Problem{folder.string(), 0,
                   "no labels: the label files of the " + count +
                       " are all empty (every image a background); a label file holds one "
                       "`class cx cy w h` line per object",
                   false};
  std::error_code ignored;
  return Problem{folder.string(), 0,
                 "no labels: none of the " + count + " has a label file, and this folder " +
                     (fs::is_directory(folder, ignored) ? "holds none of them" : "does not exist") +
                     " (an image's label is its path with the last /images/ made /labels/ and "
                     "the extension .txt: " +
                     image + " -> " + label + "); put the labels there",
                 false};
}

std::vector<std::string> problem_lines(const std::string& split, const SplitReport& report,
                                       size_t shown) {
  if (report.problems.empty()) return {};
  const size_t total = report.images.size() + size_t(report.corrupt);
  const size_t warnings = size_t(std::count_if(report.problems.begin(), report.problems.end(),
                                               [](const Problem& p) { return !p.image_skipped; }));
  std::vector<std::string> lines = {
      split + ": " + std::to_string(report.corrupt) + " of " + std::to_string(total) +
      " images skipped (unreadable, or a label that cannot be used) and " +
      std::to_string(warnings) + " warning(s) on the images kept:"};
  for (size_t k = 0; k < report.problems.size() && k < shown; ++k)
    lines.push_back("  " + report.problems[k].to_string());
  if (report.problems.size() > shown)
    lines.push_back("  ... and " + std::to_string(report.problems.size() - shown) +
                    " more (bareyolo data-check --data <yaml> lists them all)");
  return lines;
}

SplitReport verify_images(const std::vector<std::string>& image_files, int num_classes, int threads,
                          int64_t max_pixels) {
  std::vector<Finding> findings(image_files.size());
  parallel_for(image_files.size(), threads, [&](size_t i) {
    findings[i] = check_image(image_files[i], num_classes, max_pixels);
  });

  // Combined in file order, so the report does not depend on the thread count.
  SplitReport report;
  for (Finding& finding : findings) {
    for (Problem& problem : finding.labels.problems) report.problems.push_back(problem);
    if (!finding.image_ok || !finding.labels.usable()) {
      ++report.corrupt;
      continue;
    }
    if (finding.record.boxes.empty()) ++report.backgrounds;
    if (finding.labels.missing) ++report.missing_label_files;
    report.labels += int64_t(finding.record.boxes.size());
    report.images.push_back(std::move(finding.record));
  }
  if (std::optional<Problem> no_labels = no_labels_problem(report))
    report.problems.insert(report.problems.begin(), std::move(*no_labels));
  return report;
}

}  // namespace bareyolo::data
