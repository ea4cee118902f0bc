// models/train/outputs/report.h — what a run shows a person: report.html (one self-contained
// file: inline SVG line charts of the losses, mAP/precision/recall, learning rates and step time
// per epoch; the run's pictures (plots.h) embedded as data URIs; the last validation's
// per-class table; every epoch with the best one marked; the configuration as a table; no
// scripts, no external files) and the per-epoch validation table printed to the log.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "engine/trace.h"
#include "models/eval/metrics.h"
#include "models/train/callbacks.h"

namespace bareyolo::models {

// What report.html shows.
struct ReportContent {
  std::string title = "";                  // names the run
  std::string config_json = "";            // as resolved (options_to_json), shown as a table
  std::vector<EpochMetrics> history = {};  // the epochs so far
  std::optional<ValidationReport> last_validation = {};  // its per-class table
  std::vector<std::string> names = {};                   // class names
  std::string pictures_dir = "";  // where the run's pictures are (plots.h); "": none shown
  std::vector<std::vector<trace::Event>> traced_ranks = {};  // --trace: svg_step_timeline
};

// The whole report page.
std::string render_report_html(const ReportContent& content);
// Writes it atomically (readers never see half a page).
void write_report_html(const std::string& path, const ReportContent& content);

// report.html in `run_dir`, rewritten after every epoch (callbacks.h): the history a resumed
// run starts from, then each epoch's metrics; at the end once more, with the pictures drawn at
// the end (register it after plots_writer) and the run's trace.
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

// report.html's charts of `history` (exposed for tests): the losses, validation's metrics, the
// learning rates and the step time, each series one EpochMetrics field per epoch; a
// validation value of an epoch that was not validated is NaN (a gap).
struct ReportChart {
  std::string title;
  std::vector<ChartSeries> series;
};
std::vector<ReportChart> report_charts(const std::vector<EpochMetrics>& history);

// Rank 0's last traced optimizer step as an <svg> timeline, three lanes per rank (compute,
// communication, loader), every range a rectangle titled with its name; "" without a step.
std::string svg_step_timeline(const std::vector<std::vector<trace::Event>>& ranks);

}  // namespace bareyolo::models
