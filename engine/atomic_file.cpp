// engine/atomic_file.cpp — temp file, fsync, rename, fsync the directory; see atomic_file.h.
#include "engine/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace bareyolo {

namespace {

std::string system_error(const std::string& what, const std::string& path) {
  return what + " '" + path + "': " + std::strerror(errno);
}

void write_all(int fd, std::span<const uint8_t> bytes, const std::string& path) {
  while (!bytes.empty()) {
    ssize_t written = ::write(fd, bytes.data(), bytes.size());
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) throw std::runtime_error(system_error("cannot write", path));
    bytes = bytes.subspan(static_cast<size_t>(written));
  }
}

void fsync_directory(const std::filesystem::path& directory) {
  int fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error(system_error("cannot open directory", directory));
  int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) throw std::runtime_error(system_error("cannot fsync directory", directory));
}

}  // namespace

void write_file_atomically(const std::string& path,
                           const std::vector<std::span<const uint8_t>>& pieces) {
  static std::atomic<uint64_t> counter{0};
  std::filesystem::path target(path);
  std::filesystem::path directory = target.parent_path().empty() ? "." : target.parent_path();
  std::string temp =
      path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter.fetch_add(1));

  int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0)
    throw std::runtime_error(system_error("cannot save '" + path + "': cannot create", temp));
  try {
    for (auto piece : pieces) write_all(fd, piece, temp);
    if (::fsync(fd) != 0) throw std::runtime_error(system_error("cannot fsync", temp));
    int rc = ::close(fd);
    fd = -1;
    if (rc != 0) throw std::runtime_error(system_error("cannot close", temp));
    if (::rename(temp.c_str(), path.c_str()) != 0)
      throw std::runtime_error(system_error("cannot rename '" + temp + "' to", path));
  } catch (const std::runtime_error& e) {
    if (fd >= 0) ::close(fd);
    ::unlink(temp.c_str());
    throw std::runtime_error("cannot save '" + path + "' (" + e.what() + "); any existing " +
                             "file there is unchanged");
  }
  fsync_directory(directory);
}

}  // namespace bareyolo
