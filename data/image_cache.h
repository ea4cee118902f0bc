// data/image_cache.h — the decoded-image cache (`--cache ram|disk`, YOLOv5's flag): every image
// of a split decoded and resized as Dataset::load does it (long side = imgsz, load_resized),
// stored as uint8 RGB in one file per split and image size, memory-mapped read-only by every
// rank and loader thread of the host, so the host holds it once (YOLOv5 holds it per rank).
//
// Places: `disk` beside the split's label cache (`<labels>.img<imgsz>.cache`), or in the user
// cache folder when that folder is read-only (a note says where); `ram` in /dev/shm. A `ram`
// cache that would not fit in the folder's free space falls back to `disk`, with a note.
//
// File: a header (magic, format version, imgsz, image count, the dataset's fingerprint over
// paths, sizes and mtimes, the file's size, a checksum over header and index), the index (per
// image: offset, size, original size), then the pixels. A file of another version, image size
// or dataset is rebuilt, never read; a truncated or corrupt one (sizes, offsets, checksum) is
// rebuilt with a note naming what was wrong.
//
// Once per host: the process holding `<file>.lock` checks the file and, when it is not
// current, decodes the images on all cores into `<file>.tmp.<pid>` and renames it into place
// (atomic: a reader sees the old file or the new one). The others wait for the lock, then find
// the file current. Each process holding the cache keeps a shared flock on it; the `ram`
// cache's cleaner (ram_cache_cleaner.h) removes it when no process holds one any more.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/letterbox.h"
#include "data/verify.h"

namespace bareyolo::data {

enum class CacheMode { none, ram, disk };
// "" or "none" -> none, "ram", "disk"; anything else is an error naming the value.
CacheMode parse_cache_mode(const std::string& text);
const char* cache_mode_name(CacheMode mode);

// A mapped, validated cache file. The mapping is read-only and shared, so N processes and
// their threads use one copy of the pages.
class ImageCache {
 public:
  ~ImageCache();
  ImageCache(const ImageCache&) = delete;
  ImageCache& operator=(const ImageCache&) = delete;

  int imgsz() const { return imgsz_; }
  int64_t size() const { return count_; }
  const std::string& file() const { return file_; }
  int64_t file_bytes() const { return int64_t(bytes_); }
  // Image `index` as load_resized(record.path, imgsz()) returns it, bit for bit.
  LoadedImage load(int64_t index) const;
  // The same image's pixels where they lie in the mapping (valid while this cache lives), and
  // its size: what the mosaic reads without copying them out.
  struct Pixels {
    const uint8_t* data = nullptr;
    int width = 0, height = 0;
    int original_width = 0, original_height = 0;
  };
  Pixels pixels(int64_t index) const;

 private:
  friend struct ImageCacheOpener;
  ImageCache() = default;
  std::string file_;
  int fd_ = -1;  // holds the shared flock that keeps a ram cache alive
  const uint8_t* base_ = nullptr;
  size_t bytes_ = 0;
  int imgsz_ = 0;
  int64_t count_ = 0;
};

struct CacheFileOptions {
  int imgsz = 640;
  int threads = 0;                    // decoding threads; <= 0: one per core
  int64_t timeout_ms = 3 * 3600'000;  // waiting for another process's build
  int64_t space_limit_bytes = -1;     // >= 0: refuse to build a bigger file (ram's free space)
  bool cleaned_when_unused = false;   // ram: a cleaner removes it after its last user
};

// The current cache in `file` for `records`, built first when it is missing, stale or damaged
// (each rebuild adds a note saying why). Returns null, with a note, when the file would exceed
// space_limit_bytes or its folder cannot hold it. Throws for an image that cannot be decoded.
std::shared_ptr<const ImageCache> open_cache_file(const std::string& file,
                                                  const std::vector<ImageRecord>& records,
                                                  const CacheFileOptions& options,
                                                  std::vector<std::string>& notes);

struct ImageCacheRequest {
  CacheMode mode = CacheMode::none;
  int imgsz = 640;
  std::string label_cache_file = "";  // the split's label cache ("": kept in memory)
  std::string ram_folder = "/dev/shm";
  int64_t ram_limit_bytes = -1;  // >= 0: in place of ram_folder's free space (tests)
  int64_t timeout_ms = 3 * 3600'000;
  int threads = 0;
};

// The file a `disk` cache of this split goes to (before a read-only fallback), and the `ram` one.
std::string disk_cache_file(const std::vector<ImageRecord>& records, const ImageCacheRequest& r);
std::string ram_cache_file(const std::vector<ImageRecord>& records, const ImageCacheRequest& r);

// The cache `request` asks for (null for CacheMode::none), at its place or a fallback.
std::shared_ptr<const ImageCache> open_image_cache(const std::vector<ImageRecord>& records,
                                                   const ImageCacheRequest& request,
                                                   std::vector<std::string>& notes);

}  // namespace bareyolo::data
