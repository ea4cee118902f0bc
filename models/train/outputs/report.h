// models/train/outputs/report.h — what a run shows a person: report.html (one self-contained file,
// inline SVG line charts of the losses, mAP/precision/recall, learning rates and step time per
// epoch, then the table of every epoch and the configuration; no scripts, no external
// files) and the per-epoch validation table printed to the log.
#pragma once

#include <string>
#include <vector>

#include "engine/trace.h"
#include "models/eval/metrics.h"
#include "models/train/callbacks.h"

namespace bareyolo::models {

// The whole report page for the epochs so far; `title` names the run, `config_json` is
// shown as it was resolved (options_to_json); with the ranks' events of a --trace, a timeline
// of one traced step (svg_step_timeline).
std::string render_report_html(const std::vector<EpochMetrics>& history, const std::string& title,
                               const std::string& config_json,
                               const std::vector<std::vector<trace::Event>>& traced_ranks = {});
// Writes it atomically (readers never see half a page).
void write_report_html(const std::string& path, const std::vector<EpochMetrics>& history,
                       const std::string& title, const std::string& config_json,
                       const std::vector<std::vector<trace::Event>>& traced_ranks = {});

// report.html in `run_dir`, rewritten after every epoch (callbacks.h): the history a resumed
// run starts from, then each epoch's metrics; at the end once more with the run's trace.
TrainCallbacks report_writer();

// YOLOv5's validation table: "Class Images Instances P R mAP50 mAP50-95", an `all` row and one
// row per class present in the labels (named from `names` where it has the class).
std::string validation_table(const DetectionMetrics& metrics, int64_t images, int64_t labels,
                             const std::vector<std::string>& names);

// One line chart as an <svg> element (exposed for tests): x = epochs, one polyline per
// series; NaN values are gaps.
struct ChartSeries {
  std::string name, color;
  std::vector<double> values;
  bool dashed = false;
};
std::string svg_line_chart(const std::string& title, const std::vector<double>& x,
                           const std::vector<ChartSeries>& series);

// Rank 0's last traced optimizer step as an <svg> timeline, three lanes per rank (compute,
// communication, loader), every range a rectangle titled with its name; "" without a step.
std::string svg_step_timeline(const std::vector<std::vector<trace::Event>>& ranks);

}  // namespace bareyolo::models
