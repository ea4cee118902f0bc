// data/dataset.cpp — opening a verified split (see dataset.h).
#include "data/dataset.h"

#include <optional>
#include <stdexcept>

namespace bareyolo::data {

LoadedImage Dataset::load(int64_t index, int imgsz) const {
  if (cache_ && cache_->imgsz() == imgsz) return cache_->load(index);
  // Verified against the pixel limit already: no more pixels than verification saw.
  return load_resized(record(index).path, imgsz, record(index).pixels());
}

Dataset::Pixels Dataset::pixels(int64_t index, int imgsz) const {
  Pixels found;
  if (cache_ && cache_->imgsz() == imgsz) {
    const ImageCache::Pixels cached = cache_->pixels(index);
    found.data = cached.data, found.width = cached.width, found.height = cached.height;
    return found;
  }
  found.owned = load(index, imgsz).image;
  found.data = found.owned.pixels.data();
  found.width = found.owned.width, found.height = found.owned.height;
  return found;
}

OpenedSplit open_split(const DatasetConfig& config, const std::string& split,
                       const OpenOptions& options) {
  const std::vector<std::string>& sources = split_sources(config, split);
  CachedSplit verified =
      options.rank == 0 ? load_or_build_split(sources, config.num_classes(), options.max_pixels)
                        : wait_for_split(sources, config.num_classes(), options.wait_timeout_ms,
                                         options.rank, options.max_pixels);
  if (verified.report.images.empty() && !(split == "test" && sources.empty())) {
    std::string where;
    for (const std::string& source : sources) where += (where.empty() ? "" : ", ") + source;
    throw std::runtime_error(
        config.yaml_file + ": the " + split + " split has no usable image (" +
        verified.report.summary() + "); searched " + (where.empty() ? "nothing" : where) +
        " for .jpg/.png/.bmp files (labels expected in the matching labels/ folder)");
  }
  if (split == "train")
    if (std::optional<Problem> no_labels = no_labels_problem(verified.report))
      throw std::runtime_error(config.yaml_file +
                               ": cannot train on the train split: " + no_labels->to_string());
  return {Dataset(verified.report.images, config.names), std::move(verified)};
}

std::vector<std::string> single_class_names(const std::vector<std::string>& names) {
  return names.size() == 1 ? names : std::vector<std::string>{"item"};
}

Dataset as_single_class(const Dataset& dataset) {
  std::vector<ImageRecord> records = dataset.records();
  for (ImageRecord& record : records)
    for (LabelBox& box : record.boxes) box.class_id = 0;
  return Dataset(std::move(records), single_class_names(dataset.names()));
}

}  // namespace bareyolo::data
