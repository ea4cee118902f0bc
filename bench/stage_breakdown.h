// bench/stage_breakdown.h — where a training sample's CPU time goes, stage by stage: bareyolo's
// loader beside PyTorch YOLOv5's (bench/yolov5_loader.py --stages times its calls), one table
// in bench_data_loader's output. A stage is what the loader does to build a 640-px mosaic
// sample and hand it over in a batch; "other" is what no stage covers.
#pragma once

#include <optional>
#include <string>

namespace bareyolo::bench {

// CPU milliseconds per sample in each stage, averaged over `samples` samples.
struct StageBreakdown {
  long samples = 0;
  double decode_ms = 0;          // reading and decoding the image files
  double resize_ms = 0;          // scaling them to the training size
  double place_ms = 0;           // the mosaic's canvas, its four tiles and their labels
  double warp_ms = 0;            // the random perspective warp
  double hsv_ms = 0;             // the HSV jitter
  double flip_letterbox_ms = 0;  // the flips; the letterbox of a sample without mosaic
  double batch_ms = 0;           // the copy into the batch (HWC to CHW, BGR to RGB, stacking)
  double total_ms = 0;           // all the sample's time

  double other_ms() const;  // total_ms less the stages above
};

// The breakdown of a "YOLOV5_STAGES samples=<n> decode_ms=<ms> ... total_ms=<ms>" line (every
// stage above); nothing when `line` is not one.
std::optional<StageBreakdown> parse_yolov5_stages(const std::string& line);

// One table: a row per stage, the columns ours and yolov5 in ms per sample and yolov5/ours (the
// times YOLOv5 takes ours); a side that is nullopt prints "-", and no table when both are.
void print_stage_table(const std::optional<StageBreakdown>& ours,
                       const std::optional<StageBreakdown>& yolov5);

}  // namespace bareyolo::bench
