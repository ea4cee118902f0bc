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

// YOLOv5 where $YOLOV5_DIR names it (a checkout, or the pip package's folder: either has
// models/ and utils/) and the Python for a peer that imports it with `modules` ("torch, cv2"):
// the interpreter of the virtual environment the folder lies in, when it does and imports
// them (a venv's site-packages may not suit another Python's numpy), else
// find_python_running. That Python must then import YOLOv5's `yolov5_module` ("utils.loss")
// from the folder, as the peer will (bench/torch_peer.py's yolov5_module): a release tree needs
// YOLOv5's own requirements (tqdm, pandas, ...) beside torch. `why_absent` says what is
// missing, "" when all was found, so that a peer that cannot run is reported absent instead of
// failing the benchmark.
struct Yolov5Install {
  std::string folder, python, why_absent;
  bool present() const { return why_absent.empty(); }
};
Yolov5Install find_yolov5(const std::string& modules, const std::string& yolov5_module);

}  // namespace bareyolo::bench
