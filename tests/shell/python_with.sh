# tests/shell/python_with.sh — sourced by the tests that run a Python check beside bareyolo
# (onnx_export.sh, tensorboard_events.sh, install_example.sh):
#
#   python=$(python_with "numpy, onnxruntime" CANDIDATE...)
#
# Prints the first CANDIDATE interpreter (a path or a name on the PATH; empty ones are passed
# over) that imports every module named, or nothing when none does: the caller then skips,
# naming what to install. Returns 0 either way, so a `set -e` caller goes on to say why.
python_with() {
  local modules=$1 candidate
  shift
  for candidate in "$@"; do
    [ -n "$candidate" ] || continue
    if "$candidate" -c "import $modules" 2> /dev/null; then
      echo "$candidate"
      return 0
    fi
  done
}
