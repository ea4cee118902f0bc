// data/label_cache.cpp — the on-disk verification cache (see label_cache.h).
#include "data/label_cache.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "data/cache_files.h"
#include "data/image_files.h"
#include "data/label_cache_json.h"
#include "engine/atomic_file.h"

namespace fs = std::filesystem;

namespace bareyolo::data {

namespace {

std::string fallback_cache_file(const std::string& preferred) {
  fs::path p = preferred;
  return (user_cache_folder() / (p.stem().string() + "-" + hex(fnv1a(preferred)) + ".cache"))
      .string();
}

// The report in `file` if it exists and parse_label_cache takes it.
std::optional<SplitReport> read_cache(const std::string& file, const std::string& fingerprint,
                                      int num_classes) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return parse_label_cache(text.str(), fingerprint, num_classes);
}

// The current cache at its preferred place or in the user cache folder.
std::optional<CachedSplit> find_cache(const std::string& preferred, const std::string& fingerprint,
                                      int num_classes) {
  for (const std::string& file : {preferred, fallback_cache_file(preferred)}) {
    if (std::optional<SplitReport> report = read_cache(file, fingerprint, num_classes))
      return CachedSplit{std::move(*report), file, true, {}};
  }
  return std::nullopt;
}

// Writes the cache with engine/atomic_file.h's atomic replace. Returns "" or why it failed
// (a cache that cannot be written is not an error: the caller falls back). The folder is
// created only when `create_folder`: a dataset's missing labels/ folder is not made here.
std::string write_atomically(const std::string& file, const std::string& text, bool create_folder) {
  fs::path target = file;
  std::error_code ignored;
  if (create_folder) fs::create_directories(target.parent_path(), ignored);
  if (!fs::is_directory(target.parent_path(), ignored)) return "the folder does not exist";
  if (read_only_by_mode(target.parent_path())) return "the folder is read-only";
  try {
    const auto* bytes = reinterpret_cast<const uint8_t*>(text.data());
    write_file_atomically(file, {std::span<const uint8_t>(bytes, text.size())});
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return {};
}

}  // namespace

SplitFiles split_files(const std::vector<std::string>& sources) {
  SplitFiles files;
  files.images = list_image_files(sources, &files.listing_problems);
  // YOLOv5 keeps its own cache (another format) at <labels>.cache: ours goes beside it under
  // its own name, so that neither tool overwrites the other's.
  if (sources.size() == 1 && fs::path(sources[0]).extension() == ".txt")
    files.cache_file = fs::path(sources[0]).replace_extension(kLabelCacheSuffix).string();
  else if (!files.images.empty())
    files.cache_file =
        fs::path(label_path_for(files.images[0])).parent_path().string() + kLabelCacheSuffix;
  return files;
}

std::string dataset_fingerprint(const std::vector<std::string>& image_files, int num_classes,
                                int64_t max_pixels) {
  uint64_t hash = fnv1a("bareyolo labels v" + std::to_string(kLabelCacheVersion) + " nc=" +
                        std::to_string(num_classes) + " max_pixels=" + std::to_string(max_pixels));
  for (const std::string& image : image_files) {
    hash = fnv1a(file_stamp(image) + "\n", hash);
    hash = fnv1a(content_stamp(label_path_for(image)) + "\n", hash);
  }
  return hex(hash);
}

CachedSplit load_or_build_split(const std::vector<std::string>& sources, int num_classes,
                                int64_t max_pixels) {
  SplitFiles files = split_files(sources);
  CachedSplit result;
  if (files.images.empty()) return result;  // nothing to verify; the caller decides
  std::string fingerprint = dataset_fingerprint(files.images, num_classes, max_pixels);
  if (std::optional<CachedSplit> cached = find_cache(files.cache_file, fingerprint, num_classes))
    return std::move(*cached);
  std::string fallback = fallback_cache_file(files.cache_file);
  result.report = verify_images(files.images, num_classes, 0, max_pixels);
  result.report.problems.insert(result.report.problems.end(), files.listing_problems.begin(),
                                files.listing_problems.end());
  std::string text = label_cache_json(result.report, fingerprint);
  std::string reason = write_atomically(files.cache_file, text, false);
  if (reason.empty()) {
    result.cache_file = files.cache_file;
    return result;
  }
  std::string fallback_reason = write_atomically(fallback, text, true);
  if (fallback_reason.empty()) {
    result.cache_file = fallback;
    result.notes.push_back("cannot write the label cache " + files.cache_file + " (" + reason +
                           "); wrote " + fallback + " instead");
  } else {
    result.notes.push_back("cannot write the label cache " + files.cache_file + " (" + reason +
                           ") nor " + fallback + " (" + fallback_reason +
                           "); verification results are kept in memory only");
  }
  return result;
}

CachedSplit wait_for_split(const std::vector<std::string>& sources, int num_classes,
                           int64_t timeout_ms, int rank, int64_t max_pixels) {
  SplitFiles files = split_files(sources);
  CachedSplit result;
  if (files.images.empty()) return result;
  std::string fingerprint = dataset_fingerprint(files.images, num_classes, max_pixels);
  std::string fallback = fallback_cache_file(files.cache_file);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (true) {
    if (std::optional<CachedSplit> cached = find_cache(files.cache_file, fingerprint, num_classes))
      return std::move(*cached);
    if (std::chrono::steady_clock::now() >= deadline)
      throw std::runtime_error(
          "rank " + std::to_string(rank) + " waited " + std::to_string(timeout_ms / 1000) +
          " s for the label cache " + files.cache_file + " (or " + fallback +
          ") that rank 0 builds; check that rank 0 is running and can write one of them, or "
          "run `bareyolo data-check` once before training");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

}  // namespace bareyolo::data
