#!/usr/bin/env bash
# tools/check_dispatch.sh — fails when code outside the dispatch layer chooses a device's code.
#
# The one dispatch rule (ARCHITECTURE.md): an op is called the same way for every device, and
# the op routes by where its views live (kernels/route.h). So:
#  1. BAREYOLO_WITH_CUDA is tested in kernels/route.h only: every other file is compiled the
#     same way in both builds, and a build without CUDA links cuda/*_none.cpp stand-ins;
#  2. Device::is_cuda() is asked only where memory and bytes are moved — kernels/, the tensor
#     (engine/tensor.*), the communicators and launcher (engine/distributed/comm, /launch) —
#     and at the few policy decisions listed below, each with why it is not a dispatch.
#
# Usage (from anywhere): tools/check_dispatch.sh — exits 0 when the rule holds, 1 with one line
# per breach otherwise. tests/ and bench/ compare devices on purpose and are not checked.
set -euo pipefail
cd "$(dirname "$0")/.."

# file:text of an is_cuda() call that is a policy, not a dispatch.
allowed_is_cuda=(
  # a GPU rank's loader feeds a faster consumer: more threads (TrainOptions::workers)
  "models/train/options.cpp:  if (!device.is_cuda()) return 2;"
  # the selftest's launch plan pins one worker per GPU it checks
  "tools/selftest/nccl_checks.cpp:    if (device.is_cuda()) plan.cuda_indices.push_back(device.index);"
)

sources() {
  find engine data models tools kernels -type f \
    \( -name '*.cpp' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) -print0 | sort -z
}

breaches=0
while IFS= read -r -d '' file; do
  if [ "$file" != kernels/route.h ]; then
    while IFS=: read -r line text; do
      echo "$file:$line: tests BAREYOLO_WITH_CUDA; route through an op (kernels/route.h) or" \
           "add a cuda/*_none.cpp stand-in instead"
      breaches=$((breaches + 1))
    done < <(grep -n -E '^[[:space:]]*#[[:space:]]*(if|ifdef|ifndef|elif).*BAREYOLO_WITH_CUDA' \
               "$file" || true)
  fi

  case "$file" in
    kernels/* | engine/tensor.* | engine/distributed/comm/* | engine/distributed/launch/*) ;;
    *.cu | *.cuh) ;;  # CUDA code itself: it checks its arguments' devices
    *)
      while IFS=: read -r line text; do
        allowed=0
        for entry in "${allowed_is_cuda[@]}"; do
          [ "$entry" = "$file:$text" ] && allowed=1
        done
        [ "$allowed" = 1 ] && continue
        echo "$file:$line: asks is_cuda() outside the dispatch layer; call the op (it routes" \
             "by its views' device), or list the policy in tools/check_dispatch.sh with why"
        breaches=$((breaches + 1))
      done < <(grep -n 'is_cuda()' "$file" || true)
      ;;
  esac
done < <(sources)

# kernels/route.h is where the rule lives; it must still test the macro.
grep -q 'BAREYOLO_WITH_CUDA' kernels/route.h ||
  { echo "kernels/route.h: no longer tests BAREYOLO_WITH_CUDA; update this check"; exit 1; }

if [ "$breaches" -gt 0 ]; then
  echo "check_dispatch: $breaches breach(es) of the one dispatch rule"
  exit 1
fi
echo "check_dispatch: ok"
