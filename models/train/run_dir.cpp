// models/train/run_dir.cpp — see run_dir.h.
#include "models/train/run_dir.h"

#include <filesystem>
#include <stdexcept>
#include <system_error>

namespace bareyolo::models {

namespace fs = std::filesystem;

void check_run_name(const std::string& name) {
  const bool one_folder = !name.empty() && name != "." && name != ".." &&
                          name.find('/') == std::string::npos && name[0] != '-';
  if (!one_folder)
    throw std::invalid_argument("--name '" + name +
                                "': a run name must be one folder name inside --project: not "
                                "empty, not . or .., no '/', not starting with '-'; choose "
                                "where runs go with --project");
}

namespace {

// The n-th name YOLOv5 tries for <stem><suffix> in `folder`: the name itself, then stem2, ...
fs::path numbered_path(const std::string& folder, const std::string& stem,
                       const std::string& suffix, int n) {
  return fs::path(folder) / (stem + (n == 1 ? "" : std::to_string(n)) + suffix);
}

}  // namespace

std::string first_unused_path(const std::string& folder, const std::string& stem,
                              const std::string& suffix) {
  for (int n = 1;; ++n) {
    const fs::path candidate = numbered_path(folder, stem, suffix, n);
    if (!fs::exists(fs::symlink_status(candidate))) return candidate.string();
  }
}

std::string next_run_dir(const std::string& project, const std::string& name, bool exist_ok) {
  check_run_name(name);
  if (exist_ok) return numbered_path(project, name, "", 1).string();
  return first_unused_path(project, name, "");
}

std::string resolve_run_dir(const std::string& project, const std::string& name, bool exist_ok,
                            bool* created_here) {
  check_run_name(name);
  fs::create_directories(project.empty() ? "." : project);
  for (int n = 1;; ++n) {
    const fs::path candidate = numbered_path(project, name, "", n);
    std::error_code error;
    // create_directory is the claim: false when it already existed (another run's).
    const bool created = fs::create_directory(candidate, error);
    if (error)
      throw std::runtime_error("cannot create the run directory '" + candidate.string() +
                               "': " + error.message());
    if (created || exist_ok) {  // exist_ok: the first name, whether or not it existed
      if (created_here) *created_here = created;
      return candidate.string();
    }
  }
}

std::string find_resume_checkpoint(const std::string& path, const std::string& project) {
  if (!path.empty()) {
    if (fs::is_regular_file(path)) return path;
    const std::string last = last_checkpoint(path);
    if (fs::is_regular_file(last)) return last;
    throw std::invalid_argument("--resume " + path + ": neither a checkpoint file nor a run " +
                                "directory with weights/last.safetensors");
  }
  const std::string newest = newest_in_runs(project, "weights/last.safetensors");
  if (newest.empty())
    throw std::invalid_argument("--resume: no run in '" + project + "' has " +
                                "weights/last.safetensors; give the checkpoint's path");
  return newest;
}

std::string last_checkpoint(const std::string& run_dir) {
  return (fs::path(run_dir) / "weights" / "last.safetensors").string();
}

std::string newest_in_runs(const std::string& project, const std::string& file,
                           const std::function<bool(const std::string& path)>& accept) {
  fs::path newest;
  fs::file_time_type newest_time;
  std::error_code error;
  if (fs::is_directory(project, error))
    for (const fs::directory_entry& run : fs::directory_iterator(project, error)) {
      const fs::path candidate = run.path() / file;
      if (!fs::is_regular_file(candidate, error) || (accept && !accept(candidate.string())))
        continue;
      const fs::file_time_type time = fs::last_write_time(candidate, error);
      if (!error && (newest.empty() || time > newest_time)) newest = candidate, newest_time = time;
    }
  return newest.string();
}

std::string run_dir_of_checkpoint(const std::string& checkpoint) {
  return fs::absolute(checkpoint).parent_path().parent_path().lexically_normal().string();
}

}  // namespace bareyolo::models
