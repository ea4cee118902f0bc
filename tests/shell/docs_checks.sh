#!/usr/bin/env bash
# tests/shell/docs_checks.sh — the docs check (tools/check_docs.sh) passes on the tree as it is
# and fails, naming the problem, on a copy of it with one problem planted at a time: a README
# of 201 lines, a docs/ file the index does not link, a README naming a path that does not
# exist, a README that no longer links the index, a relative link to nothing.
# The planted commands run in the copy, so their $(...) and backticks are meant literally.
# shellcheck disable=SC2016
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "docs checks: FAIL: $*"; exit 1; }

# A fresh copy of what the check reads: the README, docs/ and every folder a path may name.
fresh_copy() {
  rm -rf "$tmp/tree" && mkdir -p "$tmp/tree"
  cp -r "$root/README.md" "$root/docs" "$root/kernels" "$root/engine" "$root/data" \
    "$root/models" "$root/tools" "$root/tests" "$root/bench" "$root/.ci" "$tmp/tree/"
}
check() { "$tmp/tree/tools/check_docs.sh" >"$tmp/out" 2>&1; }

# After PLANT (a command run in the copy), the check must fail and print WANT.
expect_problem() {
  local plant=$1 want=$2
  fresh_copy
  (cd "$tmp/tree" && eval "$plant") || fail "could not plant: $plant"
  if check; then fail "check_docs passed after: $plant"; fi
  grep -qF "$want" "$tmp/out" || fail "check_docs did not name '$want' after: $plant: $(head -n 3 "$tmp/out")"
}

fresh_copy
check || fail "check_docs on the tree: $(cat "$tmp/out")"
grep -q '^check_docs: README.md has ' "$tmp/out" || fail "no summary line: $(cat "$tmp/out")"

expect_problem 'while [ "$(awk "END { print NR }" README.md)" -lt 201 ]; do echo >>README.md; done' \
  "README.md has 201 lines, more than 200"
expect_problem 'echo "# An orphan" >docs/orphan.md' \
  "docs/orphan.md is not linked from docs/README.md"
expect_problem 'echo "// unlisted" >docs/examples/unlisted.cpp' \
  "docs/examples/unlisted.cpp is not linked from docs/README.md"
expect_problem 'echo "See \`tools/no_such_script.sh\` first." >>README.md' \
  "names tools/no_such_script.sh, but tools/no_such_script.sh does not exist"
expect_problem 'echo "The configs: models/yolov5{n,q}.yaml." >>README.md' \
  "but models/yolov5q.yaml does not exist"
expect_problem 'grep -v "(docs/README.md)" README.md >R && mv R README.md' \
  "README.md does not link docs/README.md"
expect_problem 'echo "[gone](gone.md)" >>docs/training.md' \
  "docs/training.md:$(($(wc -l <"$root/docs/training.md") + 1)): the link to gone.md finds nothing"
echo "docs checks: all steps passed"
