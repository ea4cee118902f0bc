// data/dataset.h — a verified split ready to be sampled: its usable images with their labels
// and sizes, and the class names. Opening a split runs (or loads) the verification pass.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/dataset_yaml.h"
#include "data/image_cache.h"
#include "data/label_cache.h"
#include "data/letterbox.h"
#include "data/verify.h"

namespace bareyolo::data {

class Dataset {
 public:
  Dataset(std::vector<ImageRecord> records, std::vector<std::string> names)
      : records_(std::move(records)), names_(std::move(names)) {}

  int64_t size() const { return int64_t(records_.size()); }
  const ImageRecord& record(int64_t index) const { return records_[size_t(index)]; }
  const std::vector<ImageRecord>& records() const { return records_; }
  const std::vector<std::string>& names() const { return names_; }
  // Image `index` with its long side resized to imgsz: from the image cache when one of that
  // size is in use (the same bits), else read from its file.
  LoadedImage load(int64_t index, int imgsz) const;
  // The same image's pixels, read in place from the image cache's mapping when they come from
  // there (valid while this dataset lives), else decoded into `owned`.
  struct Pixels {
    const uint8_t* data = nullptr;
    int width = 0, height = 0;
    Image owned;

    Pixels() = default;
    Pixels(Pixels&&) = default;  // `data` into `owned` survives the move of its buffer
    Pixels& operator=(Pixels&&) = default;
    Pixels(const Pixels&) = delete;  // a copy's `data` would point into the original
    Pixels& operator=(const Pixels&) = delete;
  };
  Pixels pixels(int64_t index, int imgsz) const;
  // Serves load() at cache->imgsz() from `cache`, made from records() (image_cache.h).
  void use_cache(std::shared_ptr<const ImageCache> cache) { cache_ = std::move(cache); }
  const ImageCache* cache() const { return cache_.get(); }

 private:
  std::vector<ImageRecord> records_;
  std::vector<std::string> names_;
  std::shared_ptr<const ImageCache> cache_;
};

struct OpenOptions {
  int rank = 0;                            // 0 (or no DDP) verifies; others wait for its cache
  int64_t wait_timeout_ms = 3600'000;      // how long rank > 0 waits for the cache
  int64_t max_pixels = kDefaultMaxPixels;  // larger images are skipped (--max-pixels; 0: no limit)
};

struct OpenedSplit {
  Dataset dataset;
  CachedSplit verification;  // summary, problems, where the cache is
};

// Opens "train", "val" or "test". A split with no usable image is an error naming the
// sources it searched (for every split but an absent "test"); so is a "train" split without a
// single label (no_labels_problem says why), which YOLOv5 refuses to train on too.
OpenedSplit open_split(const DatasetConfig& config, const std::string& split,
                       const OpenOptions& options = {});

// YOLOv5's --single-cls: a dataset as one class. The class is named "item", unless the dataset
// has one name, which it keeps; every box's class becomes 0 (after verification has checked
// the labels against the dataset's own classes).
std::vector<std::string> single_class_names(const std::vector<std::string>& names);
Dataset as_single_class(const Dataset& dataset);

}  // namespace bareyolo::data
