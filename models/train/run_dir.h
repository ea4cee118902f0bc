// models/train/run_dir.h — where a run's outputs go, named as YOLOv5 names them, and where
// `--resume` finds the run to continue.
//
//   <project>/<name>            when it does not exist yet, or with exist_ok
//   <project>/<name>2, 3, ...   otherwise, the first that does not exist
// In a data-parallel run rank 0 resolves it (and creates it, so a second run started at
// the same moment gets the next number) and the others receive it.
#pragma once

#include <functional>
#include <string>

namespace bareyolo::models {

// Refuses (std::invalid_argument naming the value and the rule) a run name that is not one
// folder name inside the project: empty, "." or "..", absolute or holding a '/' (these write
// outside --project, or make folders named "2" and ".2"), or starting with '-' (a flag taken
// as the name's value).
void check_run_name(const std::string& name);

// Resolves and creates the run directory; returns its path, and in `created` whether this
// call created it (false: exist_ok reused it). Throws std::invalid_argument for a name that
// check_run_name refuses, before creating anything, and std::runtime_error naming the path
// when it cannot be created.
std::string resolve_run_dir(const std::string& project, const std::string& name, bool exist_ok,
                            bool* created = nullptr);

// The folder resolve_run_dir would return now, creating nothing (a command checks what it will
// write there before it writes anything). A run started meanwhile may claim it first; the one
// resolve_run_dir then numbers past it is new and empty.
std::string next_run_dir(const std::string& project, const std::string& name, bool exist_ok);

// <folder>/<stem><suffix> when no such file or folder exists, else the first of
// <stem>2<suffix>, <stem>3<suffix>, ... that does not: YOLOv5's increment_path, by which
// detect.py --save-crop numbers a second crop of one class from one image (x.jpg, x2.jpg).
std::string first_unused_path(const std::string& folder, const std::string& stem,
                              const std::string& suffix);

// The checkpoint `--resume` continues from: `path` itself when it is a file; the run's
// weights/last.safetensors when it is a run directory; with an empty path, the most recently
// written <project>/*/weights/last.safetensors. Throws std::invalid_argument saying what was
// looked for when there is none.
std::string find_resume_checkpoint(const std::string& path, const std::string& project);

// The run directory of a checkpoint at <run>/weights/<file>.
std::string run_dir_of_checkpoint(const std::string& checkpoint);

// The checkpoint a run continues from, <run_dir>/weights/last.safetensors (it may not exist
// yet): the one --resume of a run directory takes, and an elastic restart.
std::string last_checkpoint(const std::string& run_dir);

// Of the run directories under `project`, the path of `file` (relative to a run directory)
// written most recently among the regular files that `accept` takes (every one without it);
// "" when there is none, or no `project`.
std::string newest_in_runs(const std::string& project, const std::string& file,
                           const std::function<bool(const std::string& path)>& accept = {});

}  // namespace bareyolo::models
