// data/file_lock.cpp — see file_lock.h.
#include "data/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <thread>

namespace bareyolo::data {

int try_lock_file(const char* path, int operation, bool create) {
  while (true) {
    const int fd = ::open(path, O_CLOEXEC | (create ? O_RDWR | O_CREAT : O_RDONLY), 0644);
    if (fd < 0) return -1;
    if (::flock(fd, operation | LOCK_NB) != 0) {
      const int error = errno;
      ::close(fd);
      errno = error;
      return -1;
    }
    struct stat held, named;
    if (::fstat(fd, &held) == 0 && ::stat(path, &named) == 0 && held.st_ino == named.st_ino &&
        held.st_dev == named.st_dev)
      return fd;
    ::close(fd);  // unlinked while we locked it: the lock guards nothing
    if (!create) {
      errno = ENOENT;
      return -1;
    }
  }
}

FileLock::FileLock(const std::string& path, int64_t timeout_ms, const std::string& what_for) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while ((fd_ = try_lock_file(path.c_str(), LOCK_EX, true)) < 0) {
    if (errno != EWOULDBLOCK)
      throw std::runtime_error("cannot create the lock file " + path + " (" + what_for +
                               "): " + std::strerror(errno));
    if (std::chrono::steady_clock::now() >= deadline)
      throw std::runtime_error("waited " + std::to_string(timeout_ms) + " ms for the lock " + path +
                               " (" + what_for +
                               "); another process holds it: let it finish, or stop it");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

FileLock::~FileLock() { ::close(fd_); }

}  // namespace bareyolo::data
