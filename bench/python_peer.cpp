// bench/python_peer.cpp — see python_peer.h.
#include "bench/python_peer.h"

#include <cstdlib>
#include <filesystem>

namespace bareyolo::bench {

std::string find_python_running(const std::string& python_check) {
  for (const char* python : {"/usr/bin/python3", "python3"}) {
    const std::string probe = std::string(python) + " -I -c '" + python_check + "' >/dev/null 2>&1";
    if (std::system(probe.c_str()) == 0) return python;
  }
  return "";
}

std::string find_yolov5_python(const std::string& yolov5_dir, const std::string& python_check) {
  namespace fs = std::filesystem;
  std::error_code error;
  for (fs::path folder = fs::absolute(yolov5_dir, error); !folder.empty();
       folder = folder.parent_path()) {
    const fs::path python = folder / "bin" / "python";
    if (fs::exists(folder / "pyvenv.cfg", error) && fs::exists(python, error)) {
      const std::string probe = python.string() + " -I -c '" + python_check + "' >/dev/null 2>&1";
      if (std::system(probe.c_str()) == 0) return python.string();
    }
    if (folder == folder.root_path()) break;
  }
  return find_python_running(python_check);
}

}  // namespace bareyolo::bench
