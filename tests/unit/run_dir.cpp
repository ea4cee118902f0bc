// tests/unit/run_dir.cpp — run directories named as YOLOv5 names them (exp, exp2, ...,
// --exist-ok), how --resume finds its checkpoint, and the lock that keeps one job per run.
#include <sys/wait.h>
#include <unistd.h>

#include <optional>
#include <thread>

#include "models/train/run_dir.h"
#include "models/train/run_lock.h"
#include "tests/support/data_fixtures.h"

using namespace bareyolo;
using namespace bareyolo::testing;

TEST_CASE("run directories are numbered exp, exp2, exp3 and created") {
  TempDir dir;
  const std::string project = (dir.path() / "runs").string();
  const std::string first = models::resolve_run_dir(project, "exp", false);
  const std::string second = models::resolve_run_dir(project, "exp", false);
  const std::string third = models::resolve_run_dir(project, "exp", false);
  CHECK(fs::path(first).filename() == "exp");
  CHECK(fs::path(second).filename() == "exp2");
  CHECK(fs::path(third).filename() == "exp3");
  CHECK(fs::is_directory(third));
  // --exist-ok: the name itself, created or not; the caller learns which.
  bool created = true;
  CHECK(fs::path(models::resolve_run_dir(project, "exp", true, &created)).filename() == "exp");
  CHECK_FALSE(created);
  CHECK(fs::path(models::resolve_run_dir(project, "other", true, &created)).filename() == "other");
  CHECK(created);
  // A file where the project should be is an error naming the path.
  write_text(dir.path() / "file", "x");
  CHECK_THROWS(models::resolve_run_dir((dir.path() / "file").string(), "exp", false));
}

TEST_CASE("the next run directory is named without creating it, and files are numbered too") {
  TempDir dir;
  const std::string project = (dir.path() / "runs").string();
  CHECK(models::next_run_dir(project, "exp", false) == project + "/exp");
  CHECK(!fs::exists(project));  // named only
  models::resolve_run_dir(project, "exp", false);
  CHECK(models::next_run_dir(project, "exp", false) == project + "/exp2");
  CHECK(models::next_run_dir(project, "exp", true) == project + "/exp");
  CHECK_THROWS_AS(models::next_run_dir(project, "../up", false), std::invalid_argument);
  CHECK_THROWS_AS(models::next_run_dir(project, "-rf", false), std::invalid_argument);
  // YOLOv5's increment_path on a file: the number goes before the suffix (x.jpg, x2.jpg, ...).
  const std::string crops = (dir.path() / "crops").string();
  CHECK(models::first_unused_path(crops, "x", ".jpg") == crops + "/x.jpg");
  write_text(dir.path() / "crops" / "x.jpg", "a");
  write_text(dir.path() / "crops" / "x2.jpg", "b");
  CHECK(models::first_unused_path(crops, "x", ".jpg") == crops + "/x3.jpg");
  CHECK(models::first_unused_path(crops, "y", ".jpg") == crops + "/y.jpg");
  // A dangling link is a name in use: writing through it would land where it points.
  fs::create_symlink(dir.path() / "nowhere.jpg", dir.path() / "crops" / "z.jpg");
  CHECK(models::first_unused_path(crops, "z", ".jpg") == crops + "/z2.jpg");
}

TEST_CASE("--resume takes a checkpoint, a run directory, or the newest run of the project") {
  TempDir dir;
  const fs::path project = dir.path() / "runs";
  CHECK_THROWS_WITH_AS(models::find_resume_checkpoint("", project.string()),
                       doctest::Contains("no run in"), std::invalid_argument);
  write_text(project / "exp" / "weights" / "last.safetensors", "a");
  std::this_thread::sleep_for(std::chrono::milliseconds(25));  // past the clock tick of mtimes
  write_text(project / "exp2" / "weights" / "last.safetensors", "b");
  write_text(project / "exp3" / "weights" / "best.safetensors", "no last here");
  CHECK(fs::path(models::find_resume_checkpoint("", project.string())) ==
        project / "exp2" / "weights" / "last.safetensors");
  CHECK(fs::path(models::find_resume_checkpoint((project / "exp").string(), "")) ==
        project / "exp" / "weights" / "last.safetensors");
  const std::string file = (project / "exp3" / "weights" / "best.safetensors").string();
  CHECK(models::find_resume_checkpoint(file, "") == file);
  CHECK_THROWS_WITH_AS(models::find_resume_checkpoint((project / "exp3").string(), ""),
                       doctest::Contains("neither a checkpoint"), std::invalid_argument);
  CHECK(fs::equivalent(models::run_dir_of_checkpoint(file), project / "exp3"));
}

TEST_CASE("a run directory's lock admits one job, and a crashed job's lock is taken over") {
  TempDir dir;
  const std::string run = dir.path().string();
  std::optional<models::RunDirLock> first(std::in_place, run);
  CHECK(first->previous_owner().empty());
  const std::string holder =
      "belongs to a job that is still running (pid " + std::to_string(::getpid()) + " on host ";
  CHECK_THROWS_WITH_AS(models::RunDirLock{run}, doctest::Contains(holder.c_str()),
                       std::runtime_error);
  first.reset();  // a clean end empties the lock file
  CHECK(models::RunDirLock(run).previous_owner().empty());

  // A job killed while holding it: the kernel drops its flock, its line stays.
  const pid_t child = ::fork();
  if (child == 0) {
    models::RunDirLock held(run);
    ::_exit(0);  // no destructor: as if killed
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  const models::RunDirLock taken(run);
  CHECK(taken.previous_owner().rfind("pid " + std::to_string(child) + " on host ", 0) == 0);
}
