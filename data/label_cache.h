// data/label_cache.h — the verification report of a split, kept on disk so that the pass
// runs once per change of the dataset.
//
// Where: `<labels folder>.cache` next to the labels (root/labels/train -> root/labels/
// train.cache), or `<list>.cache` for a single .txt source (YOLOv5's places). When that
// folder is read-only (a shared dataset) or does not exist (a dataset without labels, whose
// labels/ folder is not made for a cache), the cache goes to the user cache folder instead:
// $BAREYOLO_CACHE_DIR, else $XDG_CACHE_HOME/bareyolo, else ~/.cache/bareyolo, under a name
// derived from the first location; if that fails too, the report is kept in memory only and
// a note says so. Both places are searched when loading.
//
// Validity: the file stores a fingerprint over every image path with its size and
// modification time, every label file's path and bytes (an edit that keeps the size within
// the clock's resolution changes it too), the class count, the pixel limit and the format
// version; any change rebuilds it.
// Format: JSON (readable with any tool). Written atomically: temp file, fsync, rename, fsync
// of the folder — a reader never sees half a cache.
//
// Distributed training (YOLOv5's torch_distributed_zero_first): rank 0 calls
// load_or_build_split(), the other ranks call wait_for_split(), which polls until a cache
// with the current fingerprint appears (or the timeout passes, with an error naming the file).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/verify.h"

namespace bareyolo::data {

struct CachedSplit {
  SplitReport report;
  std::string cache_file;          // where it was read or written; "" if memory only
  bool from_cache = false;         // false: the verification pass ran now
  std::vector<std::string> notes;  // for the user (read-only folder, where the cache went)
};

// The label cache's name ending: <labels folder>.bareyolo.cache (or <list>.bareyolo.cache),
// apart from YOLOv5's <labels folder>.cache, which bareyolo never writes.
inline constexpr const char* kLabelCacheSuffix = ".bareyolo.cache";

// The image files of `sources` and the cache's preferred location.
struct SplitFiles {
  std::vector<std::string> images;
  std::string cache_file;
  std::vector<Problem> listing_problems;  // list_image_files's, added to the report
};
SplitFiles split_files(const std::vector<std::string>& sources);

// A hash over the images' paths, sizes and modification times, their label files' paths and
// contents, nc and the pixel limit.
std::string dataset_fingerprint(const std::vector<std::string>& image_files, int num_classes,
                                int64_t max_pixels = kDefaultMaxPixels);

// Loads a current cache, or verifies the split and writes one (rank 0, or no DDP). Images of
// more than `max_pixels` pixels are skipped (verify_images).
CachedSplit load_or_build_split(const std::vector<std::string>& sources, int num_classes,
                                int64_t max_pixels = kDefaultMaxPixels);

// Waits for rank 0's cache with the current fingerprint and loads it (ranks > 0). Throws
// std::runtime_error after `timeout_ms`.
CachedSplit wait_for_split(const std::vector<std::string>& sources, int num_classes,
                           int64_t timeout_ms, int rank, int64_t max_pixels = kDefaultMaxPixels);

}  // namespace bareyolo::data
