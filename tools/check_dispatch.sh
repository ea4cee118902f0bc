#!/usr/bin/env bash
# tools/check_dispatch.sh — fails when code outside the dispatch layer chooses a device's code.
#
# The one dispatch rule (ARCHITECTURE.md): an op is called the same way for every device, and
# the op routes by where its views live (kernels/route.h); memory and devices are reached the
# same way through the dispatch layer's facade (kernels/device_memory.h, device_memory_stats.h,
# devices.h, settings.h), which routes by the Device it is given. So:
#  1. BAREYOLO_WITH_CUDA is tested in kernels/route.h only: every other file is compiled the
#     same way in both builds, and a build without CUDA links cuda/*_none.cpp stand-ins;
#  2. Device::is_cpu() and is_cuda() are asked only in the dispatch layer — kernels/ and the
#     CUDA code itself (.cu and .cuh files, and every file in a cuda/ folder, which is compiled
#     only with CUDA and checks its arguments' devices);
#  3. the CUDA runtime and kernels (`cuda::`) are called only from there too.
# Text after `//` is a comment and is not checked. The few lines that break 2 or 3 on purpose
# are listed below, each as its file and exact text with why.
#
# Usage (from anywhere): tools/check_dispatch.sh — exits 0 when the rule holds, 1 with one line
# per breach otherwise. tests/ and bench/ compare devices on purpose and are not checked.
set -euo pipefail
cd "$(dirname "$0")/.."

# file:text of a line that asks for a device or calls cuda:: on purpose: a policy, not a dispatch.
allowed=(
  # a GPU rank's loader feeds a faster consumer: more threads (TrainOptions::workers)
  "models/train/options.cpp:  if (!device.is_cuda()) return 2;"
  # the defaults that differ by device (models/train/gated_defaults.h) ask what the device is
  "models/train/options.cpp:  if (!device.is_cuda()) return {};"
  # the selftest's launch plan pins one worker per GPU it checks
  "tools/selftest/nccl_checks.cpp:    if (device.is_cuda()) plan.cuda_indices.push_back(device.index);"
  # a check of the request before any communicator exists: NCCL moves GPU memory only, so a
  # rank on the CPU that asks for it is refused with a sentence
  "engine/distributed/launch/process_group.cpp:    if (!options.device.is_cuda()) {"
  # the same check for shared memory, which moves host memory only: a GPU rank that asks for
  # it is refused with a sentence
  "engine/distributed/launch/process_group.cpp:    if (!options.device.is_cpu()) {"
)

sources() {
  find engine data models tools kernels -type f \
    \( -name '*.cpp' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) | sort
}

# The dispatch layer and the CUDA code itself: rules 2 and 3 do not apply there.
in_dispatch_layer() {
  case "$1" in
    kernels/* | *.cu | *.cuh | cuda/* | */cuda/*) return 0 ;;
  esac
  return 1
}

# One line per suspect: file:line:what:text, `what` being is_cpu(), is_cuda() or cuda (a call).
suspects() {
  local -a checked=()
  local file
  while IFS= read -r file; do
    in_dispatch_layer "$file" || checked+=("$file")
  done < <(sources)
  [ "${#checked[@]}" -gt 0 ] || return 0
  awk '
    { code = $0; sub(/\/\/.*/, "", code) }
    match(code, /is_(cpu|cuda)\(\)/) {
      print FILENAME ":" FNR ":" substr(code, RSTART, RLENGTH) ":" $0
    }
    code ~ /(^|[^A-Za-z0-9_])cuda::/ { print FILENAME ":" FNR ":cuda:" $0 }
  ' "${checked[@]}"
}

breaches=0
while IFS=: read -r file line text; do
  [ "$file" = kernels/route.h ] && continue
  echo "$file:$line: tests BAREYOLO_WITH_CUDA; route through an op (kernels/route.h) or" \
       "add a cuda/*_none.cpp stand-in instead"
  breaches=$((breaches + 1))
done < <(sources | xargs -d '\n' grep -n -H -E \
           '^[[:space:]]*#[[:space:]]*(if|ifdef|ifndef|elif).*BAREYOLO_WITH_CUDA' || true)

while IFS=: read -r file line what text; do
  allowed_line=0
  for entry in "${allowed[@]}"; do
    [ "$entry" = "$file:$text" ] && allowed_line=1
  done
  [ "$allowed_line" = 1 ] && continue
  case "$what" in
    cuda)
      echo "$file:$line: calls cuda:: outside the dispatch layer; call the facade in kernels/" \
           "(device_memory.h, device_memory_stats.h, devices.h, settings.h), or list the" \
           "exception in tools/check_dispatch.sh with why" ;;
    *)
      echo "$file:$line: asks $what outside the dispatch layer; call the op (it routes by its" \
           "views' device) or the facade in kernels/, or list the policy in" \
           "tools/check_dispatch.sh with why" ;;
  esac
  breaches=$((breaches + 1))
done < <(suspects)

# An exception whose line is gone would excuse the next line written with that text: drop it.
for entry in "${allowed[@]}"; do
  if ! grep -qxF -- "${entry#*:}" "${entry%%:*}" 2>/dev/null; then
    echo "tools/check_dispatch.sh: the allowed line is no longer in ${entry%%:*}:" \
         "'${entry#*:}'; remove it from the list"
    breaches=$((breaches + 1))
  fi
done

# kernels/route.h is where the rule lives; it must still test the macro.
grep -q 'BAREYOLO_WITH_CUDA' kernels/route.h ||
  { echo "kernels/route.h: no longer tests BAREYOLO_WITH_CUDA; update this check"; exit 1; }

if [ "$breaches" -gt 0 ]; then
  echo "check_dispatch: $breaches breach(es) of the one dispatch rule"
  exit 1
fi
echo "check_dispatch: ok"
