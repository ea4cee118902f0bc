// data/ram_cache_cleaner.cpp — see ram_cache_cleaner.h.
#include "data/ram_cache_cleaner.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "data/file_lock.h"

namespace bareyolo::data {

namespace {

struct CleanerPaths {
  std::string cache, lock, cleaner;
  explicit CleanerPaths(const std::string& file)
      : cache(file), lock(file + ".lock"), cleaner(file + ".cleaner") {}
};

// Closes every descriptor but `keep`, so that the cleaner holds none of the job's sockets,
// pipes or flocks (it would keep a dead rank's connections, or ctest's pipes, open).
void close_all_but(int keep, int max_fd) {
  for (int fd = 0; fd < max_fd; ++fd)
    if (fd != keep) ::close(fd);
}

// Whether a process holds its shared flock on the cache (an exclusive one is refused).
bool in_use(const std::string& cache) {
  const int fd = ::open(cache.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool used = ::flock(fd, LOCK_EX | LOCK_NB) != 0;
  ::close(fd);  // drops our exclusive flock, if we got it
  return used;
}

// The cleaner's life, in a forked child of a possibly threaded process: async-signal-safe
// calls only (open, flock, stat, unlink, nanosleep, write, _exit).
[[noreturn]] void run_cleaner(const CleanerPaths& paths, int ready_fd, int max_fd) {
  close_all_but(ready_fd, max_fd);
  const int cleaner_fd = try_lock_file(paths.cleaner.c_str(), LOCK_EX, true);
  const char answer = cleaner_fd >= 0 ? 'y' : 'n';
  (void)!::write(ready_fd, &answer, 1);
  ::close(ready_fd);
  if (cleaner_fd < 0) ::_exit(1);
  const timespec pause{0, 200'000'000};
  while (true) {
    ::nanosleep(&pause, nullptr);
    if (in_use(paths.cache)) continue;
    // Unused or gone: decide under the build lock, where nobody can start to use it.
    const int lock_fd = try_lock_file(paths.lock.c_str(), LOCK_EX, true);
    if (lock_fd < 0 && errno != EWOULDBLOCK) ::_exit(0);  // its folder is gone
    if (lock_fd < 0) continue;  // someone is opening or building it: look again later
    if (in_use(paths.cache)) {
      ::close(lock_fd);
      continue;
    }
    // The cleaner's file first: whoever takes the next build lock sees no cleaner.
    ::unlink(paths.cleaner.c_str());
    ::unlink(paths.cache.c_str());
    ::unlink(paths.lock.c_str());
    ::_exit(0);
  }
}

}  // namespace

bool ram_cache_cleaner_alive(const std::string& file) {
  const CleanerPaths paths(file);
  if (::access(paths.cleaner.c_str(), F_OK) != 0) return false;
  const int fd = try_lock_file(paths.cleaner.c_str(), LOCK_EX, false);
  if (fd < 0) return ::access(paths.cleaner.c_str(), F_OK) == 0;  // locked by a live cleaner
  ::unlink(paths.cleaner.c_str());                                // a dead cleaner's file
  ::close(fd);
  return false;
}

void start_ram_cache_cleaner(const std::string& file) {
  const CleanerPaths paths(file);
  rlimit files{};
  const int max_fd = ::getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < 65536
                         ? int(files.rlim_cur)
                         : 65536;
  int ready[2];
  if (::pipe2(ready, O_CLOEXEC) != 0)
    throw std::runtime_error("cannot start the cleaner of the ram cache " + file +
                             ": pipe: " + std::strerror(errno));
  const pid_t child = ::fork();
  if (child == 0) {
    // Its own session, then a grandchild re-parented to init: outside the job's process
    // group, never a zombie of ours.
    ::setsid();
    if (::fork() == 0) run_cleaner(paths, ready[1], max_fd);
    ::_exit(0);
  }
  ::close(ready[1]);
  if (child > 0) ::waitpid(child, nullptr, 0);
  char answer = 'n';
  pollfd wait_for{ready[0], POLLIN, 0};
  const bool answered =
      child > 0 && ::poll(&wait_for, 1, 5000) == 1 && ::read(ready[0], &answer, 1) == 1;
  ::close(ready[0]);
  if (!answered || answer != 'y')
    throw std::runtime_error("cannot start the cleaner of the ram cache " + file +
                             " (it did not take " + paths.cleaner +
                             "); use --cache disk, or check that /dev/shm is writable");
}

}  // namespace bareyolo::data
