// data/file_lock.h — an advisory lock (flock) on a file named by its path, between processes.
//
// flock locks belong to an open file description and end when the process ends, SIGKILL
// included, so no lock outlives a crashed holder. A lock file may be removed by its last user
// (the ram cache's cleaner does that); a lock taken on a file that was unlinked meanwhile is
// worthless, so try_lock_file() retries until the locked file is still the one at `path`.
#pragma once

#include <cstdint>
#include <string>

namespace bareyolo::data {

// Opens (creating it when `create`) and locks `path` (LOCK_EX or LOCK_SH) without blocking.
// Returns the descriptor holding the lock, or -1 with errno set (EWOULDBLOCK: busy). Calls only
// async-signal-safe functions, so a forked child of a threaded process may use it.
int try_lock_file(const char* path, int operation, bool create);

// An exclusive lock held for the object's life.
class FileLock {
 public:
  // Waits up to timeout_ms for `path`; throws std::runtime_error naming it and `what_for`, at
  // once when the lock file cannot be created.
  FileLock(const std::string& path, int64_t timeout_ms, const std::string& what_for);
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace bareyolo::data
