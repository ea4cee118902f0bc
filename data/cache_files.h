// data/cache_files.h — what the data caches (the label cache, the decoded-image cache) share:
// a file's stamp and a 64-bit hash for fingerprints, and where a cache goes when the dataset's
// own folder may not be written (engine/user_cache.h's folder).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "engine/user_cache.h"  // user_cache_folder: where a cache of a read-only dataset goes

namespace bareyolo::data {

// FNV-1a over `text`, continuing from `hash`.
uint64_t fnv1a(const std::string& text, uint64_t hash = 0xcbf29ce484222325ull);
uint64_t fnv1a_bytes(const void* bytes, size_t size, uint64_t hash = 0xcbf29ce484222325ull);
// 16 lower-case hex digits.
std::string hex(uint64_t value);

// "path|size|mtime" ("path|-" for a missing file): a change of content shows in it, unless
// the file keeps its size and is rewritten within the file system's clock resolution.
std::string file_stamp(const std::string& path);
// "path|hash of the bytes" ("path|-reason" when it is not a readable regular file): for small
// files whose every edit must show (label files).
std::string content_stamp(const std::string& path);

// A folder whose mode has no write bit at all is read-only by intent, even for root (who may
// write anyway): a shared dataset is never written into.
bool read_only_by_mode(const std::filesystem::path& folder);

}  // namespace bareyolo::data
