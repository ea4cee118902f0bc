// data/cache_files.cpp — see cache_files.h.
#include "data/cache_files.h"

#include <sys/stat.h>

#include <cstdio>

#include "data/regular_file.h"

namespace fs = std::filesystem;

namespace bareyolo::data {

uint64_t fnv1a_bytes(const void* bytes, size_t size, uint64_t hash) {
  const auto* p = static_cast<const unsigned char*>(bytes);
  for (size_t i = 0; i < size; ++i) hash = (hash ^ p[i]) * 0x100000001b3ull;
  return hash;
}

uint64_t fnv1a(const std::string& text, uint64_t hash) {
  return fnv1a_bytes(text.data(), text.size(), hash);
}

std::string hex(uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(value));
  return text;
}

std::string file_stamp(const std::string& path) {
  std::error_code error;
  auto size = fs::file_size(path, error);
  if (error) return path + "|-";
  auto mtime = fs::last_write_time(path, error).time_since_epoch().count();
  return path + "|" + std::to_string(size) + "|" + std::to_string(mtime);
}

std::string content_stamp(const std::string& path) {
  const FileContents contents = read_regular_file(path);
  if (contents.kind != FileContents::regular) return path + "|-" + contents.error;
  return path + "|" + hex(fnv1a(contents.bytes));
}

bool read_only_by_mode(const fs::path& folder) {
  struct stat info;
  return ::stat(folder.c_str(), &info) == 0 && (info.st_mode & 0222) == 0;
}

}  // namespace bareyolo::data
