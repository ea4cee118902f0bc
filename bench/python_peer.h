// bench/python_peer.h — finding the Python that runs a benchmark's PyTorch peer. Debian's
// python3-torch lives in /usr/bin/python3's dist-packages, which another python3 earlier on
// the PATH (pyenv, a venv) does not see, so /usr/bin/python3 is asked first.
#pragma once

#include <string>

namespace bareyolo::bench {

// The first of /usr/bin/python3, python3 that runs `python_check` (Python source, e.g.
// "import torch") without error in isolated mode (-I: the current folder and PYTHON* stay
// out); "" when none does.
std::string find_python_running(const std::string& python_check);

// The Python for a peer that imports YOLOv5 from `yolov5_dir` (a checkout, or the pip
// package's folder): the interpreter of the virtual environment the folder lies in, when it
// does and runs `python_check` (a venv's site-packages may not suit another Python's numpy),
// else find_python_running(python_check).
std::string find_yolov5_python(const std::string& yolov5_dir, const std::string& python_check);

}  // namespace bareyolo::bench
