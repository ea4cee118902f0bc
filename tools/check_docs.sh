#!/usr/bin/env bash
# tools/check_docs.sh — fails when the documentation stops being navigable or names what is
# not there.
#
# README.md is the front page; the long material lives in docs/, indexed by docs/README.md.
# Every change may edit them, so what keeps them honest is checked here, not left to review:
#  1. README.md has at most 200 lines (a front page: what grows goes to a docs/ page);
#  2. README.md links docs/README.md, and docs/README.md links every other file under docs/
#     (docs/examples/ included), so no page is orphaned;
#  3. every repository path README.md names exists: each word that starts with a top-level
#     folder (kernels/ engine/ data/ models/ tools/ tests/ bench/ docs/ .ci/), in prose,
#     backticks, links or code blocks alike; braces expand (models/yolov5{n,s}.yaml) and a
#     glob must match something;
#  4. every relative link in README.md and in the Markdown files under docs/ resolves to a file
#     or folder (links outside code blocks; the #anchor part is not checked).
#
# Usage (from anywhere): tools/check_docs.sh — exits 0 with one line, 1 with one line per
# problem (file:line where there is one).
set -euo pipefail
cd "$(dirname "$0")/.."

max_readme_lines=200
top_folders='\.ci|kernels|engine|data|models|tools|tests|bench|docs'
problems=0
problem() {
  echo "check_docs: $*" >&2
  problems=$((problems + 1))
}

# LINE<TAB>TARGET for every Markdown link of a file: inline [text](target) and reference
# definitions [label]: target, outside fenced code blocks and inline code spans.
links_of() {
  awk '
    /^[[:space:]]*(```|~~~)/ { fence = !fence; next }
    fence { next }
    {
      line = $0
      gsub(/`[^`]*`/, "", line)
      if (match(line, /^[[:space:]]*\[[^]]+\]:[[:space:]]*[^[:space:]]+/)) {
        definition = substr(line, RSTART, RLENGTH)
        sub(/^[[:space:]]*\[[^]]+\]:[[:space:]]*/, "", definition)
        print FNR "\t" definition
      }
      while (match(line, /\]\([^)]*\)/)) {
        target = substr(line, RSTART + 2, RLENGTH - 3)
        sub(/^[[:space:]]+/, "", target)
        sub(/[[:space:]].*$/, "", target)  # drop a "title"
        print FNR "\t" target
        line = substr(line, RSTART + RLENGTH)
      }
    }' "$1"
}

# The repository path a relative link TARGET of FILE points to ("" for URLs and anchors).
resolve_link() {
  local file=$1 target=$2
  case "$target" in
    '' | '#'* | *://* | mailto:*) return 0 ;;
  esac
  target=${target%%#*}
  target=${target%%\?*}
  target=${target#<}
  target=${target%>}
  if [[ $target == /* ]]; then
    realpath -m --relative-to=. "./$target"
  else
    realpath -m --relative-to=. "$(dirname "$file")/$target"
  fi
}

# 1. The front page's length.
readme_lines=$(awk 'END { print NR }' README.md)
if [ "$readme_lines" -gt "$max_readme_lines" ]; then
  problem "README.md has $readme_lines lines, more than $max_readme_lines: move the detail to a" \
          "docs/ page and link it"
fi

# 4. Every relative link resolves (and collect what README.md and docs/README.md link).
declare -A readme_links=() index_links=()
link_count=0
mapfile -t markdown_files < <({ echo README.md; find docs -type f -name '*.md'; } | sort -u)
for file in "${markdown_files[@]}"; do
  while IFS=$'\t' read -r line target; do
    path=$(resolve_link "$file" "$target")
    [ -n "$path" ] || continue
    link_count=$((link_count + 1))
    [ "$file" = README.md ] && readme_links[$path]=1
    [ "$file" = docs/README.md ] && index_links[$path]=1
    [ -e "$path" ] || problem "$file:$line: the link to $target finds nothing ($path)"
  done < <(links_of "$file")
done

# 2. The index: README.md -> docs/README.md -> every docs/ file.
if [ ! -f docs/README.md ]; then
  problem "docs/README.md is missing: docs/ needs an index with one line per file"
else
  [ -n "${readme_links[docs/README.md]:-}" ] ||
    problem "README.md does not link docs/README.md, the index of docs/"
fi
docs_count=0
while IFS= read -r file; do
  [ "$file" = docs/README.md ] && continue
  docs_count=$((docs_count + 1))
  [ -n "${index_links[$file]:-}" ] ||
    problem "$file is not linked from docs/README.md: add one line saying what it answers"
done < <(find docs -type f | sort)

# 3. Every repository path the README names exists. A word starts a path when it begins with
# a top-level folder and follows a character that cannot be part of a path (so runs/train/exp
# and shapes/data.yaml are not read as paths of this repository).
declare -A seen_paths=()
path_count=0
while IFS= read -r hit; do
  line=${hit%%:*}
  word=${hit#*:}
  [[ $word =~ ^($top_folders)/ ]] || word=${word:1}  # the character before the path
  while [[ $word == *[.,] ]]; do word=${word%?}; done
  [ -n "${seen_paths[$line:$word]:-}" ] && continue
  seen_paths[$line:$word]=1
  path_count=$((path_count + 1))
  # Only [A-Za-z0-9_./{},*-] reach here: the eval expands braces and globs, nothing else.
  expanded=()
  eval "expanded=( $word )"
  for path in "${expanded[@]}"; do
    if [ ! -e "$path" ]; then
      problem "README.md:$line: names $word, but $path does not exist"
      break
    fi
  done
done < <(grep -noE "(^|[^A-Za-z0-9_./~-])($top_folders)/[A-Za-z0-9_./{},*-]*" README.md || true)

if [ "$problems" -gt 0 ]; then
  echo "check_docs: $problems problem(s) in README.md and docs/ (above)" >&2
  exit 1
fi
echo "check_docs: README.md has $readme_lines lines (at most $max_readme_lines), docs/README.md" \
     "indexes all $docs_count docs/ files, $path_count README paths exist, $link_count relative" \
     "links resolve"
