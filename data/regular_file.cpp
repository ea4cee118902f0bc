// data/regular_file.cpp — see regular_file.h.
#include "data/regular_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace bareyolo::data {

namespace {

// When `path` is a symbolic link that open() could not follow (`open_error` ENOENT or ELOOP),
// what it points at and why that fails; else "". Such a file exists, broken: it is not missing.
std::string dead_link_reason(const std::string& path, int open_error) {
  struct stat link {};
  if ((open_error != ENOENT && open_error != ELOOP) || ::lstat(path.c_str(), &link) != 0 ||
      !S_ISLNK(link.st_mode))
    return {};
  std::error_code ignored;
  const std::string target = std::filesystem::read_symlink(path, ignored).string();
  return open_error == ELOOP
             ? "it is a symbolic link to '" + target + "' in a loop of links that never ends"
             : "it is a symbolic link to '" + target + "', which does not exist";
}

}  // namespace

FileContents read_regular_file(const std::string& path) {
  FileContents result;
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    const int open_error = errno;
    const std::string dead_link = dead_link_reason(path, open_error);
    result.kind = open_error == ENOENT && dead_link.empty() ? FileContents::missing
                                                            : FileContents::unreadable;
    result.error = dead_link.empty() ? std::strerror(open_error) : dead_link;
    return result;
  }
  struct stat info {};
  if (::fstat(fd, &info) != 0) {
    result.kind = FileContents::unreadable;
    result.error = std::strerror(errno);
  } else if (S_ISDIR(info.st_mode)) {
    result.kind = FileContents::directory;
    result.error = "it is a directory";
  } else if (!S_ISREG(info.st_mode)) {
    result.kind = FileContents::not_regular;
    result.error = S_ISFIFO(info.st_mode)   ? "it is a FIFO, not a regular file"
                   : S_ISSOCK(info.st_mode) ? "it is a socket, not a regular file"
                                            : "it is a device, not a regular file";
  } else {
    result.kind = FileContents::regular;
    result.bytes.resize(size_t(info.st_size));
    size_t done = 0;
    while (done < result.bytes.size()) {
      const ssize_t got = ::read(fd, result.bytes.data() + done, result.bytes.size() - done);
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) {
        result.kind = FileContents::unreadable;  // EIO, EISDIR on odd filesystems, ...
        result.error = std::strerror(errno);
        break;
      }
      if (got == 0) break;  // it shrank while being read: what is there is the file
      done += size_t(got);
    }
    result.bytes.resize(result.kind == FileContents::regular ? done : 0);
  }
  ::close(fd);
  return result;
}

}  // namespace bareyolo::data
