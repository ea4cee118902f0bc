// data/label_cache.cpp — the on-disk verification cache (see label_cache.h).
#include "data/label_cache.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "data/cache_files.h"
#include "data/image_files.h"
#include "engine/atomic_file.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace bareyolo::data {

namespace {

constexpr int kCacheVersion = 2;  // 2: missing_label_files; label contents fingerprinted

std::string fallback_cache_file(const std::string& preferred) {
  fs::path p = preferred;
  return (user_cache_folder() / (p.stem().string() + "-" + hex(fnv1a(preferred)) + ".cache"))
      .string();
}

json to_json(const SplitReport& report, const std::string& fingerprint) {
  json images = json::array();
  for (const ImageRecord& record : report.images) {
    json boxes = json::array();
    for (const LabelBox& b : record.boxes) boxes.push_back({b.class_id, b.cx, b.cy, b.w, b.h});
    images.push_back({record.path, record.width, record.height, std::move(boxes)});
  }
  json problems = json::array();
  for (const Problem& p : report.problems)
    problems.push_back({p.file, p.line, p.message, p.image_skipped});
  return {{"version", kCacheVersion},
          {"fingerprint", fingerprint},
          {"backgrounds", report.backgrounds},
          {"corrupt", report.corrupt},
          {"missing_label_files", report.missing_label_files},
          {"labels", report.labels},
          {"images", std::move(images)},
          {"problems", std::move(problems)}};
}

SplitReport from_json(const json& doc) {
  SplitReport report;
  report.backgrounds = doc.at("backgrounds").get<int>();
  report.corrupt = doc.at("corrupt").get<int>();
  report.missing_label_files = doc.at("missing_label_files").get<int>();
  report.labels = doc.at("labels").get<int64_t>();
  for (const json& item : doc.at("images")) {
    ImageRecord record{
        item.at(0).get<std::string>(), item.at(1).get<int>(), item.at(2).get<int>(), {}};
    for (const json& b : item.at(3))
      record.boxes.push_back({b.at(0).get<int>(), b.at(1).get<float>(), b.at(2).get<float>(),
                              b.at(3).get<float>(), b.at(4).get<float>()});
    report.images.push_back(std::move(record));
  }
  for (const json& p : doc.at("problems"))
    report.problems.push_back({p.at(0).get<std::string>(), p.at(1).get<int>(),
                               p.at(2).get<std::string>(), p.at(3).get<bool>()});
  return report;
}

// The report in `file` if it exists, parses, and carries `fingerprint`.
std::optional<SplitReport> read_cache(const std::string& file, const std::string& fingerprint) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return std::nullopt;
  try {
    json doc = json::parse(in);
    if (doc.at("version").get<int>() != kCacheVersion ||
        doc.at("fingerprint").get<std::string>() != fingerprint)
      return std::nullopt;
    return from_json(doc);
  } catch (const json::exception&) {
    return std::nullopt;  // damaged or foreign file: rebuilt by the caller
  }
}

// The current cache at its preferred place or in the user cache folder.
std::optional<CachedSplit> find_cache(const std::string& preferred,
                                      const std::string& fingerprint) {
  for (const std::string& file : {preferred, fallback_cache_file(preferred)}) {
    if (std::optional<SplitReport> report = read_cache(file, fingerprint))
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
  if (sources.size() == 1 && fs::path(sources[0]).extension() == ".txt")
    files.cache_file = fs::path(sources[0]).replace_extension(".cache").string();
  else if (!files.images.empty())
    files.cache_file = fs::path(label_path_for(files.images[0])).parent_path().string() + ".cache";
  return files;
}

std::string dataset_fingerprint(const std::vector<std::string>& image_files, int num_classes,
                                int64_t max_pixels) {
  uint64_t hash = fnv1a("bareyolo labels v" + std::to_string(kCacheVersion) + " nc=" +
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
  if (std::optional<CachedSplit> cached = find_cache(files.cache_file, fingerprint))
    return std::move(*cached);
  std::string fallback = fallback_cache_file(files.cache_file);
  result.report = verify_images(files.images, num_classes, 0, max_pixels);
  result.report.problems.insert(result.report.problems.end(), files.listing_problems.begin(),
                                files.listing_problems.end());
  std::string text = to_json(result.report, fingerprint).dump();
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
    if (std::optional<CachedSplit> cached = find_cache(files.cache_file, fingerprint))
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
