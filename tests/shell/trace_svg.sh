#!/usr/bin/env bash
# tests/shell/trace_svg.sh BAREYOLO MODEL_YAML — `bareyolo trace-summary TRACE --svg OUT.svg` on
# a real trace: 2 CPU ranks train the tiny model for one traced step, and the timeline drawn
# from it is well-formed XML (python3's minidom parses it) with one row group per rank, in
# order, each holding that rank's forward, backward, gradient buckets (labelled), SyncBN
# meetings and optimizer step. A trace with no optimizer step and an unwritable output are
# refused, naming the file.
set -euo pipefail
bareyolo=$(realpath "$1") cfg=$(realpath "$2")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "trace svg: $*" >&2; exit 1; }

"$bareyolo" make-shapes --out "$work/shapes" --n-train 16 --n-val 4 --imgsz 64 --classes 2 > /dev/null
# --nbs 8 with --batch 8: every batch is an optimizer step, so step 1 is one micro-batch.
"$bareyolo" train --data "$work/shapes/data.yaml" --cfg "$cfg" --imgsz 64 --batch 8 --nbs 8 \
  --epochs 1 --workers 0 --device cpu --nproc-per-node 2 --trace "$work/trace.json" \
  --trace-steps 1:2 --project "$work/runs" --name traced > "$work/train.txt" 2>&1 \
  || fail "the traced 2-rank run failed: $(tail -n 5 "$work/train.txt")"
"$bareyolo" trace-summary "$work/trace.json" --svg "$work/step.svg" > "$work/summary.txt" \
  || fail "trace-summary --svg failed: $(cat "$work/summary.txt")"
grep -q "timeline of the last traced step: $work/step.svg" "$work/summary.txt" \
  || fail "no line naming the SVG: $(tail -n 2 "$work/summary.txt")"
grep -Eq "^  bucket 0 .* model\.[0-9]+$" "$work/summary.txt" \
  || fail "no node named as closing bucket 0: $(grep -m2 "bucket" "$work/summary.txt")"

python3 - "$work/step.svg" <<'EOF' || fail "the SVG is not the timeline expected (above)"
import sys, xml.dom.minidom
svg = xml.dom.minidom.parse(sys.argv[1]).documentElement  # raises on malformed XML
assert svg.tagName == "svg", svg.tagName
groups = [g for g in svg.getElementsByTagName("g") if g.getAttribute("class") == "rank"]
assert [g.getAttribute("id") for g in groups] == ["rank0", "rank1"], [g.getAttribute("id") for g in groups]
tops = []
for g in groups:
    ranges = [r for r in g.getElementsByTagName("rect") if r.getAttribute("class") == "range"]
    titles = [r.getElementsByTagName("title")[0].firstChild.data for r in ranges]
    for kind in ("forward model.", "backward model.", "allreduce bucket 0", "syncbn model.",
                 "optimizer step"):
        assert any(t.startswith(kind) for t in titles), f"{g.getAttribute('id')}: no {kind} range"
    labels = [t for t in g.getElementsByTagName("text") if t.getAttribute("class") == "bucket-label"]
    assert any(t.firstChild.data == "0" for t in labels), "bucket 0 is not labelled"
    tops.append(min(float(r.getAttribute("y")) for r in ranges))
assert tops[0] < tops[1], f"rank 0's rows are not above rank 1's: {tops}"
print(f"trace svg: {len(svg.getElementsByTagName('rect'))} rects, rank groups in order")
EOF

# Refusals name the file and what to do.
source "$(dirname "$0")/refuses.sh"
echo '{"traceEvents": []}' > "$work/empty.json"
refuses "$work/empty.json: the trace holds no \"optimizer step\" range" \
  "$bareyolo" trace-summary "$work/empty.json" --svg "$work/empty.svg"
test ! -e "$work/empty.svg" || fail "a refused trace left an SVG"
refuses "cannot save '$work/missing/step.svg'" \
  "$bareyolo" trace-summary "$work/trace.json" --svg "$work/missing/step.svg"
echo "trace svg: all steps passed"
