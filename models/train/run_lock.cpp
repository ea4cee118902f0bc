// models/train/run_lock.cpp — see run_lock.h.
#include "models/train/run_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "engine/distributed/process_name.h"

namespace bareyolo::models {

namespace {

std::string read_all(int fd) {
  std::string text;
  char chunk[256];
  ::lseek(fd, 0, SEEK_SET);
  for (ssize_t got; (got = ::read(fd, chunk, sizeof chunk)) > 0;) text.append(chunk, size_t(got));
  while (!text.empty() && (text.back() == '\n' || text.back() == '\0')) text.pop_back();
  return text;
}

}  // namespace

RunDirLock::RunDirLock(const std::string& run_dir)
    : path_((std::filesystem::path(run_dir) / kFileName).string()) {
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0)
    throw std::runtime_error("cannot open the run's lock " + path_ + ": " + std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    const std::string holder = read_all(fd_);
    ::close(fd_);
    if (error == EWOULDBLOCK)
      throw std::runtime_error(run_dir + " belongs to a job that is still running (" +
                               (holder.empty() ? "its owner is starting" : holder) +
                               "): wait for it to end, or stop it, before resuming or reusing "
                               "this run");
    throw std::runtime_error("cannot lock " + path_ + ": " + std::strerror(error));
  }
  previous_owner_ = read_all(fd_);
  const std::string me = dist::this_process_name() + "\n";
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, me.data(), me.size(), 0) != ssize_t(me.size()))
    throw std::runtime_error("cannot write the run's lock " + path_ + ": " + std::strerror(errno));
}

RunDirLock::~RunDirLock() {
  // Emptied, not removed: a job that opened the file just now then locks the same file this
  // one held (removing it would let that job and a later one lock two different files). An
  // empty lock file is one whose job ended cleanly. (Should emptying fail, the next job only
  // reports this one as a previous owner.)
  (void)!::ftruncate(fd_, 0);
  ::close(fd_);
}

}  // namespace bareyolo::models
