#!/usr/bin/env bash
# tools/setup.sh — set up a fresh Debian/Ubuntu machine and build bareyolo into build/.
#
# Installs the Debian packages the build needs (only those missing), then configures a
# Release build (with CUDA when nvcc is found: WITH_CUDA=AUTO) and builds everything.
# It only installs and builds. Extra arguments go to cmake's configure step, e.g.
#   tools/setup.sh -DWITH_CUDA=OFF
#   tools/setup.sh -DCMAKE_CUDA_ARCHITECTURES="80;90"
set -euo pipefail
cd "$(dirname "$0")/.."

# libopenblas0-pthread: not for bareyolo itself, but so that bench_train's PyTorch peer (Debian's
# python3-torch, when installed) gets an optimised BLAS instead of the reference one.
# clang-format: tools/test.sh checks the sources' format with it (Debian 12's is version 14).
# libssl-dev: libcrypto's HMAC-SHA256 for the rendezvous's proof of the job's token (static).
# libturbojpeg0-dev: TurboJPEG (libjpeg-turbo), which decodes the JPEGs (static).
# libonnx-dev, libprotobuf-dev: `bareyolo export`'s own binary, bareyolo-export (ONNX graphs).
# clang, libclang-rt-dev: libFuzzer and its sanitizers, for tools/fuzz.sh (and the fuzz smoke).
packages=(cmake g++ make libyaml-cpp-dev doctest-dev libstb-dev nlohmann-json3-dev libcli11-dev
          libssl-dev libturbojpeg0-dev clang-format libopenblas0-pthread libonnx-dev
          libprotobuf-dev python3-venv clang libclang-rt-dev)
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$package")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo_if_needed=()
  [ "$(id -u)" -eq 0 ] || sudo_if_needed=(sudo)
  # Lock timeout: wait for a concurrent apt instead of failing at once.
  "${sudo_if_needed[@]}" apt-get -o DPkg::Lock::Timeout=300 update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_if_needed[@]}" apt-get -o DPkg::Lock::Timeout=300 \
    install -y -qq --no-install-recommends "${missing[@]}"
fi

# ONNX Runtime and OpenCV 4.6 (PyPI) for the test of exported graphs, in a venv of its own:
# without them that test is skipped, saying why, so a failed install does not stop the set-up.
# OpenCV 4.6 is Debian 12's (python3-opencv), whose DNN module the graph must load; its PyPI
# wheel is one 48 MB download where the Debian package pulls in 207 others (470 MB), and it
# was built against NumPy 1.
if [ ! -x .venv-onnx/bin/python3 ] ||
  ! .venv-onnx/bin/python3 -c "import onnxruntime, cv2" 2>/dev/null
then
  { python3 -m venv .venv-onnx &&
    .venv-onnx/bin/pip install -q onnxruntime "numpy<2" "opencv-python-headless==4.6.0.66"; } ||
    echo "setup: no onnxruntime or OpenCV (pip failed): the ONNX export test will be skipped"
fi

# TensorBoard (PyPI) for the test that reads a run's events file with TensorBoard's own reader,
# in a venv of its own; without it that test is skipped, saying why.
if [ ! -x .venv-tensorboard/bin/python3 ] ||
  ! .venv-tensorboard/bin/python3 -c "import tensorboard" 2>/dev/null
then
  { python3 -m venv .venv-tensorboard && .venv-tensorboard/bin/pip install -q tensorboard; } ||
    echo "setup: no tensorboard (pip failed): the TensorBoard events test will be skipped"
fi

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "$@"
cmake --build build -j "$(nproc)"
echo "setup: built $(pwd)/build/bareyolo"
