// models/train/run_lock.h — one job per run directory. The process that owns a job (bareyolo's
// launcher, the one process of a single-rank run, or rank 0 under an external launcher) holds
// an exclusive flock on <run>/.lock for the job's life, with its pid and host written in it.
// A second job on the same run — `--resume` of a run that is still training, or `--exist-ok`
// into it — is refused with a sentence naming the holder. The kernel drops a flock when its
// holder dies however it dies, so a crashed job's lock is free: the next job takes it over
// (and says whose it was: a job that ends cleanly empties the file, a crashed one leaves its
// line). Forked workers inherit the descriptor and so share the lock.
#pragma once

#include <string>

namespace bareyolo::models {

class RunDirLock {
 public:
  // Takes the lock of `run_dir` (which must exist), or throws std::runtime_error naming the
  // job that holds it.
  explicit RunDirLock(const std::string& run_dir);
  ~RunDirLock();
  RunDirLock(const RunDirLock&) = delete;
  RunDirLock& operator=(const RunDirLock&) = delete;

  // What the lock file said before this lock took it ("pid 123 on host h"): the owner of a
  // job that ended without removing it (a crash, SIGKILL), or "" when it was not there.
  const std::string& previous_owner() const { return previous_owner_; }
  static constexpr const char* kFileName = ".lock";

 private:
  std::string path_;
  int fd_ = -1;
  std::string previous_owner_;
};

}  // namespace bareyolo::models
