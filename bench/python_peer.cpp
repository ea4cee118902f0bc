// bench/python_peer.cpp — see python_peer.h.
#include "bench/python_peer.h"

#include <cstdlib>
#include <filesystem>

namespace bareyolo::bench {

namespace {

// Whether `python` runs `python_check` without error in isolated mode.
bool runs(const std::string& python, const std::string& python_check) {
  const std::string probe = python + " -I -c '" + python_check + "' >/dev/null 2>&1";
  return std::system(probe.c_str()) == 0;
}

// The interpreter of the virtual environment `yolov5_dir` lies in, when it does and runs
// `python_check`; else find_python_running(python_check).
std::string python_for(const std::string& yolov5_dir, const std::string& python_check) {
  namespace fs = std::filesystem;
  std::error_code error;
  for (fs::path folder = fs::absolute(yolov5_dir, error); !folder.empty();
       folder = folder.parent_path()) {
    const fs::path python = folder / "bin" / "python";
    if (fs::exists(folder / "pyvenv.cfg", error) && fs::exists(python, error) &&
        runs(python.string(), python_check))
      return python.string();
    if (folder == folder.root_path()) break;
  }
  return find_python_running(python_check);
}

}  // namespace

std::string find_python_running(const std::string& python_check) {
  for (const char* python : {"/usr/bin/python3", "python3"})
    if (runs(python, python_check)) return python;
  return "";
}

Yolov5Install find_yolov5(const std::string& modules, const std::string& yolov5_module) {
  Yolov5Install found;
  const char* folder = std::getenv("YOLOV5_DIR");
  namespace fs = std::filesystem;
  if (!folder || !*folder || !fs::exists(fs::path(folder) / "models") ||
      !fs::exists(fs::path(folder) / "utils")) {
    found.why_absent = "$YOLOV5_DIR does not name YOLOv5 (a checkout or the pip package's folder)";
    return found;
  }
  found.folder = folder;
  found.python = python_for(folder, "import " + modules);
  if (found.python.empty()) {
    found.why_absent = "no Python imports " + modules;
    return found;
  }
  const std::string import_from_folder = "import sys; sys.path.insert(0, \"" BAREYOLO_SOURCE_DIR
                                         "/bench\"); import torch_peer; "
                                         "torch_peer.yolov5_module(\"" +
                                         found.folder + "\", \"" + yolov5_module + "\")";
  if (!runs(found.python, import_from_folder))
    found.why_absent = found.python + " cannot import YOLOv5's " + yolov5_module + " from " +
                       found.folder + " (install YOLOv5's requirements.txt for it)";
  return found;
}

}  // namespace bareyolo::bench
