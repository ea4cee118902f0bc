#!/usr/bin/env bash
# tests/shell/static_checks.sh — the static checks tools/test.sh runs first pass on the tree as it
# is and fail, naming the file and line (or the problem), on a copy of it with one breach planted
# at a time: the layers (tools/check_layers.sh), the dispatch rule (tools/check_dispatch.sh), the
# Solver's ownership of the optimizer step (tools/check_solver.sh) and the docs
# (tools/check_docs.sh: a README of 201 lines, a docs/ file the index does not link, a README
# naming a path that does not exist or no longer linking the index, a relative link to nothing),
# and the test case names ctest can take (tools/check_test_names.sh, on a stand-in binary).
# The planted commands run in the copy, so their $(...) and backticks are meant literally.
# shellcheck disable=SC2016
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "static checks: FAIL: $*"; exit 1; }

# A fresh copy of what the checks read: the sources, the README, docs/ and every folder a path
# in the README may name.
fresh_copy() {
  rm -rf "$tmp/tree" && mkdir -p "$tmp/tree"
  cp -r "$root/README.md" "$root/docs" "$root/kernels" "$root/engine" "$root/data" \
    "$root/models" "$root/tools" "$root/tests" "$root/bench" "$root/.ci" "$tmp/tree/"
}

# CHECK WANT WHAT: CHECK, run on the copy as planted (WHAT says how), must fail and print WANT.
must_fail() {
  local check=$1 want=$2 what=$3
  if "$tmp/tree/tools/$check" >"$tmp/out" 2>&1; then fail "$check passed $what"; fi
  grep -qF "$want" "$tmp/out" || fail "$check did not name '$want' $what: $(head -n 3 "$tmp/out")"
}
# CHECK FILE TEXT WANT: with TEXT appended to FILE, CHECK must fail and print WANT.
expect_breach() {
  fresh_copy
  printf '%s\n' "$3" >>"$tmp/tree/$2"
  must_fail "$1" "$4" "with '$3' in $2"
}
# CHECK PLANT WANT: after PLANT (a command run in the copy), CHECK must fail and print WANT.
expect_problem() {
  fresh_copy
  (cd "$tmp/tree" && eval "$2") || fail "could not plant: $2"
  must_fail "$1" "$3" "after: $2"
}

for check in check_layers.sh check_dispatch.sh check_solver.sh check_docs.sh; do
  fresh_copy
  "$tmp/tree/tools/$check" >"$tmp/out" 2>&1 || fail "$check on the tree: $(cat "$tmp/out")"
done

lines() { wc -l <"$root/$1" | tr -d ' '; }
expect_breach check_layers.sh kernels/cpu/pool.cpp '#include "data/batch.h"' \
  "kernels/cpu/pool.cpp:$(($(lines kernels/cpu/pool.cpp) + 1)): kernels includes data/batch.h"
expect_breach check_layers.sh models/loss/loss.cpp '#include "models/eval/boxes.h"' \
  "models/loss/loss.cpp:$(($(lines models/loss/loss.cpp) + 1)): loss includes"
expect_breach check_dispatch.sh data/batch.h '#ifdef BAREYOLO_WITH_CUDA' \
  "data/batch.h:$(($(lines data/batch.h) + 1)): tests BAREYOLO_WITH_CUDA"
expect_breach check_dispatch.sh models/eval/validate.cpp 'bool f(Device d) { return d.is_cuda(); }' \
  "models/eval/validate.cpp:$(($(lines models/eval/validate.cpp) + 1)): asks is_cuda()"
expect_breach check_dispatch.sh data/batch.cpp 'int f(Device d) { if (d.is_cpu()) return 1; return 2; }' \
  "data/batch.cpp:$(($(lines data/batch.cpp) + 1)): asks is_cpu()"
expect_breach check_dispatch.sh data/batch.cpp \
  'void f(void* d, void* s) { cuda::copy(d, s, 4, cuda::CopyKind::host_to_device, 0); }' \
  "data/batch.cpp:$(($(lines data/batch.cpp) + 1)): calls cuda::"
# The tensor moves bytes through the facade (kernels/device_memory.h) like everyone else: it has
# no exemption left.
expect_breach check_dispatch.sh engine/tensor.cpp 'bool f(Device d) { return d.is_cuda(); }' \
  "engine/tensor.cpp:$(($(lines engine/tensor.cpp) + 1)): asks is_cuda()"
# A listed policy excuses its one line, not the same text elsewhere.
expect_breach check_dispatch.sh models/train/run_dir.cpp '  if (!device.is_cuda()) return 2;' \
  "models/train/run_dir.cpp:$(($(lines models/train/run_dir.cpp) + 1)): asks is_cuda()"

# CHECK FILE TEXT: with TEXT appended to FILE, CHECK must still pass.
expect_pass() {
  local check=$1 file=$2 text=$3
  fresh_copy
  printf '%s\n' "$text" >>"$tmp/tree/$file"
  "$tmp/tree/tools/$check" >"$tmp/out" 2>&1 ||
    fail "$check refused '$text' in $file: $(head -n 3 "$tmp/out")"
}
# A comment that names a CUDA call is not one.
expect_pass check_dispatch.sh data/batch.cpp '// cuda::copy(...) is what upload_async queues on a GPU'
# The dispatch layer, and CUDA code in a cuda/ folder, ask devices and call CUDA.
expect_pass check_dispatch.sh kernels/cpu/device_memory.cpp 'bool f(Device d) { return d.is_cuda(); }'
expect_pass check_dispatch.sh engine/distributed/comm/cuda/nccl_communicator.cpp \
  'int f() { return cuda::device_count(); }'
# Only the Solver names the pieces of an optimizer step (engine/optim aside).
expect_breach check_solver.sh bench/train.cpp '// then clip_gradient_norm(arena, 10.0);' \
  "bench/train.cpp:$(($(lines bench/train.cpp) + 1)): names a piece of the optimizer step"

fresh_copy
"$tmp/tree/tools/check_docs.sh" >"$tmp/out" 2>&1
grep -q '^check_docs: README.md has ' "$tmp/out" || fail "no summary line: $(cat "$tmp/out")"
expect_problem check_docs.sh 'while [ "$(awk "END { print NR }" README.md)" -lt 201 ]; do echo >>README.md; done' \
  "README.md has 201 lines, more than 200"
expect_problem check_docs.sh 'echo "# An orphan" >docs/orphan.md' \
  "docs/orphan.md is not linked from docs/README.md"
expect_problem check_docs.sh 'echo "// unlisted" >docs/examples/unlisted.cpp' \
  "docs/examples/unlisted.cpp is not linked from docs/README.md"
expect_problem check_docs.sh 'echo "See \`tools/no_such_script.sh\` first." >>README.md' \
  "names tools/no_such_script.sh, but tools/no_such_script.sh does not exist"
expect_problem check_docs.sh 'echo "The configs: models/yolov5{n,q}.yaml." >>README.md' \
  "but models/yolov5q.yaml does not exist"
expect_problem check_docs.sh 'grep -v "(docs/README.md)" README.md >R && mv R README.md' \
  "README.md does not link docs/README.md"
expect_problem check_docs.sh 'echo "[gone](gone.md)" >>docs/training.md' \
  "docs/training.md:$(($(wc -l <"$root/docs/training.md") + 1)): the link to gone.md finds nothing"

# check_test_names.sh reads the names a build's test binaries list: a stand-in binary listing
# them as doctest does passes with safe names and fails naming each unsafe one.
names_build() {
  mkdir -p "$tmp/names" && rm -f "$tmp/names/unit_tests"
  printf '#!/usr/bin/env bash\nprintf "%%s\\n" "[doctest] listing all test case names" "====="' \
    >"$tmp/names/unit_tests"
  printf ' %q' "$@" >>"$tmp/names/unit_tests"
  printf ' "====="\n' >>"$tmp/names/unit_tests"
  chmod +x "$tmp/names/unit_tests"
}
names_build "mosaic: the centre in [s/2, 3s/2], each tile its corner" "hsv, with the value gain"
"$root/tools/check_test_names.sh" "$tmp/names" >"$tmp/out" 2>&1 ||
  fail "check_test_names.sh refused safe names: $(cat "$tmp/out")"
names_build "hsv; with the value gain" "mosaic: the centre in [s/2, 3s/2)" "fine"
if "$root/tools/check_test_names.sh" "$tmp/names" >"$tmp/out" 2>&1; then
  fail "check_test_names.sh passed unsafe names"
fi
grep -qF '"hsv; with the value gain" holds' "$tmp/out" &&
  grep -qF '"mosaic: the centre in [s/2, 3s/2)" has unbalanced square brackets' "$tmp/out" &&
  grep -qF "2 test case name(s)" "$tmp/out" ||
  fail "check_test_names.sh did not name both unsafe names: $(cat "$tmp/out")"
echo "static checks: all steps passed"
