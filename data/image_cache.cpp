// data/image_cache.cpp — the decoded-image cache file: layout, checks, build, mapping (see
// image_cache.h).
#include "data/image_cache.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <thread>

#include "data/cache_files.h"
#include "data/file_lock.h"
#include "data/parallel_for.h"
#include "data/ram_cache_cleaner.h"

namespace fs = std::filesystem;

namespace bareyolo::data {

namespace {

constexpr char kMagic[8] = {'B', 'Y', 'I', 'M', 'G', 'C', 'A', 'C'};
// 2: JPEGs decoded by TurboJPEG, large ones reduced in the DCT domain (pixels unlike version
// 1's, stb_image's).
constexpr uint32_t kFormatVersion = 2;
constexpr uint64_t kPixelAlignment = 64;

struct FileHeader {
  char magic[8];
  uint32_t version = kFormatVersion;
  uint32_t imgsz = 0;
  uint64_t count = 0;
  uint64_t fingerprint = 0;  // paths, sizes and mtimes of the images
  uint64_t file_bytes = 0;
  uint64_t checksum = 0;  // over this header (checksum 0) and the index
  uint64_t reserved[2] = {};
};
static_assert(sizeof(FileHeader) == 64);

struct IndexEntry {
  uint64_t offset = 0;
  uint32_t width = 0, height = 0;  // as stored: load_resized's size
  uint32_t original_width = 0, original_height = 0;
  uint64_t reserved = 0;
};
static_assert(sizeof(IndexEntry) == 32);

std::string megabytes(uint64_t bytes) {
  return std::to_string((bytes + 999'999) / 1'000'000) + " MB";
}

uint64_t dataset_fingerprint(const std::vector<ImageRecord>& records) {
  uint64_t hash = fnv1a("bareyolo image cache");
  for (const ImageRecord& record : records)
    hash = fnv1a(file_stamp(record.path) + "|" + std::to_string(record.width) + "x" +
                     std::to_string(record.height) + "\n",
                 hash);
  return hash;
}

uint64_t checksum(FileHeader header, const IndexEntry* index) {
  header.checksum = 0;
  return fnv1a_bytes(index, sizeof(IndexEntry) * header.count, fnv1a_bytes(&header, sizeof header));
}

// The header and index a cache of `records` at `imgsz` has (pixels not included).
struct Layout {
  FileHeader header;
  std::vector<IndexEntry> index;
};

Layout layout_of(const std::vector<ImageRecord>& records, int imgsz) {
  Layout layout;
  std::memcpy(layout.header.magic, kMagic, sizeof kMagic);
  layout.header.imgsz = uint32_t(imgsz);
  layout.header.count = records.size();
  layout.header.fingerprint = dataset_fingerprint(records);
  uint64_t offset = sizeof(FileHeader) + sizeof(IndexEntry) * records.size();
  for (const ImageRecord& record : records) {
    offset = (offset + kPixelAlignment - 1) / kPixelAlignment * kPixelAlignment;
    const ImageSize size = resized_size(record.width, record.height, imgsz);
    layout.index.push_back({offset, uint32_t(size.width), uint32_t(size.height),
                            uint32_t(record.width), uint32_t(record.height), 0});
    offset += uint64_t(size.width) * size.height * 3;
  }
  layout.header.file_bytes = offset;
  layout.header.checksum = checksum(layout.header, layout.index.data());
  return layout;
}

// "" when the mapped file is the cache `expected` describes; else what is wrong with it.
std::string problem_of(const uint8_t* base, size_t bytes, const Layout& expected) {
  FileHeader header;
  if (bytes < sizeof header)
    return "truncated (" + std::to_string(bytes) + " bytes, shorter than its header)";
  std::memcpy(&header, base, sizeof header);
  if (std::memcmp(header.magic, kMagic, sizeof kMagic) != 0)
    return "not a bareyolo image cache (corrupt header)";
  if (header.version != kFormatVersion)
    return "format version " + std::to_string(header.version) + ", this build reads " +
           std::to_string(kFormatVersion);
  if (header.imgsz != expected.header.imgsz)
    return "made for image size " + std::to_string(header.imgsz) + ", this run uses " +
           std::to_string(expected.header.imgsz);
  if (header.count != expected.header.count || header.fingerprint != expected.header.fingerprint)
    return "made for another dataset (or its images changed since)";
  if (header.file_bytes != bytes)
    return "truncated (" + std::to_string(bytes) + " of " + std::to_string(header.file_bytes) +
           " bytes)";
  const auto* index = reinterpret_cast<const IndexEntry*>(base + sizeof header);
  if (checksum(header, index) != header.checksum) return "corrupt (its checksum does not match)";
  if (std::memcmp(index, expected.index.data(), sizeof(IndexEntry) * header.count) != 0)
    return "corrupt (its index does not match the dataset's image sizes)";
  return {};
}

}  // namespace

// Maps, checks and builds cache files for ImageCache (its private constructor).
struct ImageCacheOpener {
  // The mapped file with this process's shared flock, or null with `problem` ("" = missing).
  static std::shared_ptr<const ImageCache> try_open(const std::string& file, const Layout& layout,
                                                    std::string& problem) {
    problem.clear();
    auto cache = std::shared_ptr<ImageCache>(new ImageCache());
    cache->file_ = file;
    // A shared flock marks the cache as in use; the cleaner's probe may hold it for a moment.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while ((cache->fd_ = try_lock_file(file.c_str(), LOCK_SH, false)) < 0) {
      if (errno != EWOULDBLOCK) return nullptr;  // missing (or unreadable: rebuilt)
      if (std::chrono::steady_clock::now() >= deadline)
        throw std::runtime_error("cannot take a shared lock on the image cache " + file);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    struct stat info;
    if (::fstat(cache->fd_, &info) != 0) return nullptr;
    cache->bytes_ = size_t(info.st_size);
    if (cache->bytes_ > 0) {
      void* mapped = ::mmap(nullptr, cache->bytes_, PROT_READ, MAP_SHARED, cache->fd_, 0);
      if (mapped == MAP_FAILED) {
        problem = std::string("cannot be mapped (") + std::strerror(errno) + ")";
        return nullptr;
      }
      cache->base_ = static_cast<const uint8_t*>(mapped);
      // A forked child (a cleaner) must not inherit the mapping: it would keep the file, and
      // this process's flock on it, alive.
      ::madvise(mapped, cache->bytes_, MADV_DONTFORK);
    }
    problem = problem_of(cache->base_, cache->bytes_, layout);
    if (!problem.empty()) return nullptr;
    cache->imgsz_ = int(layout.header.imgsz);
    cache->count_ = int64_t(layout.header.count);
    return cache;
  }
};

ImageCache::~ImageCache() {
  if (base_) ::munmap(const_cast<uint8_t*>(base_), bytes_);
  if (fd_ >= 0) ::close(fd_);
}

ImageCache::Pixels ImageCache::pixels(int64_t index) const {
  IndexEntry entry;
  std::memcpy(&entry, base_ + sizeof(FileHeader) + sizeof(IndexEntry) * size_t(index),
              sizeof entry);
  return {base_ + entry.offset, int(entry.width), int(entry.height), int(entry.original_width),
          int(entry.original_height)};
}

LoadedImage ImageCache::load(int64_t index) const {
  const Pixels found = pixels(index);
  LoadedImage loaded;
  loaded.image.width = found.width;
  loaded.image.height = found.height;
  loaded.image.pixels.assign(found.data, found.data + size_t(found.width) * found.height * 3);
  loaded.original_width = found.original_width;
  loaded.original_height = found.original_height;
  return loaded;
}

namespace {

// Writes the cache of `records` to `file` through a temporary file and a rename. Returns
// false, with a note, when its folder has no room for it.
bool build_cache_file(const std::string& file, const std::vector<ImageRecord>& records,
                      const Layout& layout, const CacheFileOptions& options,
                      std::vector<std::string>& notes) {
  const uint64_t bytes = layout.header.file_bytes;
  const std::string folder = fs::path(file).parent_path().string();
  if (options.space_limit_bytes >= 0 && bytes > uint64_t(options.space_limit_bytes)) {
    notes.push_back("the image cache " + file + " needs " + megabytes(bytes) + ", more than the " +
                    megabytes(uint64_t(options.space_limit_bytes)) + " free in " + folder);
    return false;
  }
  const std::string temporary = file + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(temporary.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    throw std::runtime_error("cannot write the image cache " + temporary + ": " +
                             std::strerror(errno) + "; choose another --cache");
  auto discard = [&] {
    ::close(fd);
    ::unlink(temporary.c_str());
  };
  // Reserved up front: on tmpfs a write to a page that does not fit is a SIGBUS, not an error.
  if (const int error = ::posix_fallocate(fd, 0, off_t(bytes)); error != 0) {
    discard();
    notes.push_back("the image cache " + file + " needs " + megabytes(bytes) + ", which " + folder +
                    " cannot hold (" + std::strerror(error) + ")");
    return false;
  }
  void* mapped = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (mapped == MAP_FAILED) {
    discard();
    throw std::runtime_error("cannot map the image cache " + temporary + ": " +
                             std::strerror(errno));
  }
  ::madvise(mapped, bytes, MADV_DONTFORK);
  auto* base = static_cast<uint8_t*>(mapped);
  try {
    parallel_for(records.size(), options.threads, [&](size_t i) {
      const LoadedImage loaded =
          load_resized(records[i].path, options.imgsz, records[i].pixels());  // as verified
      const IndexEntry& entry = layout.index[i];
      if (uint32_t(loaded.image.width) != entry.width ||
          uint32_t(loaded.image.height) != entry.height)
        throw std::runtime_error(records[i].path + " is " + std::to_string(loaded.original_width) +
                                 "x" + std::to_string(loaded.original_height) +
                                 " now, not the verified size; run again to verify it anew");
      std::memcpy(base + entry.offset, loaded.image.pixels.data(), loaded.image.pixels.size());
    });
  } catch (...) {
    ::munmap(mapped, bytes);
    discard();
    throw;
  }
  std::memcpy(base, &layout.header, sizeof layout.header);
  std::memcpy(base + sizeof layout.header, layout.index.data(),
              sizeof(IndexEntry) * layout.index.size());
  const bool synced = ::msync(mapped, bytes, MS_SYNC) == 0 && ::fsync(fd) == 0;
  ::munmap(mapped, bytes);
  if (!synced || ::rename(temporary.c_str(), file.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    discard();
    throw std::runtime_error("cannot write the image cache " + file + ": " + why);
  }
  ::close(fd);
  return true;
}

}  // namespace

CacheMode parse_cache_mode(const std::string& text) {
  if (text.empty() || text == "none") return CacheMode::none;
  if (text == "ram") return CacheMode::ram;
  if (text == "disk") return CacheMode::disk;
  throw std::invalid_argument("--cache '" + text + "' is not one of ram, disk (or none)");
}

const char* cache_mode_name(CacheMode mode) {
  return mode == CacheMode::ram ? "ram" : mode == CacheMode::disk ? "disk" : "none";
}

std::shared_ptr<const ImageCache> open_cache_file(const std::string& file,
                                                  const std::vector<ImageRecord>& records,
                                                  const CacheFileOptions& options,
                                                  std::vector<std::string>& notes) {
  const Layout layout = layout_of(records, options.imgsz);
  FileLock lock(file + ".lock", options.timeout_ms, "another process builds the image cache");
  std::error_code ignored;
  if (options.cleaned_when_unused && fs::exists(file) && !ram_cache_cleaner_alive(file)) {
    notes.push_back("the ram cache " + file +
                    " was left by a job that ended without removing it; replacing it");
    fs::remove(file, ignored);
  }
  std::string problem;
  std::shared_ptr<const ImageCache> cache = ImageCacheOpener::try_open(file, layout, problem);
  if (!cache) {
    if (!problem.empty())
      notes.push_back("the image cache " + file + " is " + problem + "; rebuilding it");
    notes.push_back("caching " + std::to_string(records.size()) + " images (" +
                    megabytes(layout.header.file_bytes) + " at " + std::to_string(options.imgsz) +
                    " px) in " + file);
    if (!build_cache_file(file, records, layout, options, notes)) return nullptr;
    cache = ImageCacheOpener::try_open(file, layout, problem);
    if (!cache)
      throw std::runtime_error("the image cache " + file + " just written is " +
                               (problem.empty() ? "missing" : problem) +
                               "; is another program writing there?");
  }
  if (options.cleaned_when_unused && !ram_cache_cleaner_alive(file)) start_ram_cache_cleaner(file);
  return cache;
}

namespace {

std::string with_suffix(fs::path file, const std::string& suffix) {
  return file.replace_extension("").string() + suffix;
}

std::string size_suffix(int imgsz) { return ".img" + std::to_string(imgsz) + ".cache"; }

// Bytes free to an unprivileged writer in `folder`; 0 when it does not exist.
int64_t free_bytes(const std::string& folder) {
  struct statvfs info;
  if (::statvfs(folder.c_str(), &info) != 0) return 0;
  return int64_t(info.f_bavail) * int64_t(info.f_frsize);
}

bool writable_folder(const fs::path& folder) {
  std::error_code ignored;
  fs::create_directories(folder, ignored);
  return !read_only_by_mode(folder) && ::access(folder.c_str(), W_OK) == 0;
}

}  // namespace

std::string disk_cache_file(const std::vector<ImageRecord>& records, const ImageCacheRequest& r) {
  if (!r.label_cache_file.empty()) return with_suffix(r.label_cache_file, size_suffix(r.imgsz));
  const std::string first = records.empty() ? "" : records.front().path;
  return (user_cache_folder() / ("images-" + hex(fnv1a(first)) + size_suffix(r.imgsz))).string();
}

std::string ram_cache_file(const std::vector<ImageRecord>& records, const ImageCacheRequest& r) {
  return (fs::path(r.ram_folder) /
          ("bareyolo-" + hex(fnv1a(disk_cache_file(records, r))) + size_suffix(r.imgsz)))
      .string();
}

std::shared_ptr<const ImageCache> open_image_cache(const std::vector<ImageRecord>& records,
                                                   const ImageCacheRequest& request,
                                                   std::vector<std::string>& notes) {
  if (request.mode == CacheMode::none) return nullptr;
  CacheFileOptions options{
      .imgsz = request.imgsz, .threads = request.threads, .timeout_ms = request.timeout_ms};
  if (request.mode == CacheMode::ram) {
    options.space_limit_bytes =
        request.ram_limit_bytes >= 0 ? request.ram_limit_bytes : free_bytes(request.ram_folder);
    options.cleaned_when_unused = true;
    if (auto cache = open_cache_file(ram_cache_file(records, request), records, options, notes))
      return cache;
    notes.push_back("--cache ram does not fit, using --cache disk instead (a container's " +
                    request.ram_folder + " is often small: docker run --shm-size=...)");
    options.space_limit_bytes = -1;
    options.cleaned_when_unused = false;
  }
  std::string file = disk_cache_file(records, request);
  if (!writable_folder(fs::path(file).parent_path())) {
    const std::string fallback =
        (user_cache_folder() / (fs::path(with_suffix(file, "")).filename().string() + "-" +
                                hex(fnv1a(file)) + size_suffix(request.imgsz)))
            .string();
    notes.push_back("the dataset's folder " + fs::path(file).parent_path().string() +
                    " is read-only: the disk cache goes to " + fallback);
    file = fallback;
    writable_folder(fs::path(file).parent_path());
  }
  if (auto cache = open_cache_file(file, records, options, notes)) return cache;
  throw std::runtime_error(notes.back() + "; free some disk space or train without --cache");
}

}  // namespace bareyolo::data
