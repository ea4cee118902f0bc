// models/train/callbacks.h — what a training run tells the outside world, and the built-in loggers.
//
// TrainCallbacks is a set of optional hooks (std::function, empty = not called). The trainer
// fires them on rank 0 only, in this order:
//   on_train_start(info)         once, after setup (info.history: epochs already done when
//   resuming) on_epoch_end(epoch)          after an epoch's last batch, before validation
//   on_fit_epoch_end(metrics)    after validation: the epoch's row of results.csv
//   on_model_save(path)          after each checkpoint file is written
//   on_train_end(summary)        once, when the run ends (finished, stopped early or --max-steps)
// A hook that throws stops the run with its error (checkpoints already written stay intact).
//
// The built-in loggers are ordinary TrainCallbacks: results.csv (YOLOv5's columns) and a
// JSON-lines file (one object per epoch with every field of EpochMetrics). Both rewrite the
// history of a resumed run at on_train_start, so rows written after the checkpoint the run
// resumed from (a killed epoch's) disappear.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace bareyolo::models {

// One epoch's numbers: YOLOv5's results.csv row plus timing and fitness.
struct EpochMetrics {
  int epoch = 0;                                       // 0-based, as YOLOv5's results.csv
  double train_box = 0, train_obj = 0, train_cls = 0;  // running means over the epoch
  double precision = 0, recall = 0, map50 = 0, map50_95 = 0;
  double val_box = 0, val_obj = 0, val_cls = 0;
  double lr0 = 0, lr1 = 0, lr2 = 0;            // the optimizer groups' lr at the epoch's last batch
  double fitness = 0;                          // 0.1 mAP50 + 0.9 mAP50-95
  bool validated = false;                      // false: --no-val skipped this epoch's validation
  double epoch_seconds = 0, step_seconds = 0;  // wall time; mean per batch
};

struct TrainStartInfo {
  std::string run_dir;
  int start_epoch = 0, epochs = 0;
  std::vector<EpochMetrics> history;  // epochs finished before a resume
};

struct TrainEndInfo {
  std::string run_dir;
  int epochs_run = 0;
  bool finished = false;  // all epochs (or early stopping); false after --max-steps
  double best_fitness = 0;
};

struct TrainCallbacks {
  std::function<void(const TrainStartInfo&)> on_train_start;
  std::function<void(int epoch)> on_epoch_end;
  std::function<void(const EpochMetrics&)> on_fit_epoch_end;
  std::function<void(const std::string& path)> on_model_save;
  std::function<void(const TrainEndInfo&)> on_train_end;
};

// results.csv: header + one row per epoch, YOLOv5's columns (epoch, train/box_loss, ...,
// x/lr2), flushed after every row.
TrainCallbacks csv_logger(const std::string& path);
// One JSON object per line per epoch, every EpochMetrics field by name.
TrainCallbacks jsonl_logger(const std::string& path);

// The CSV text pieces (shared with tests and report readers).
std::string results_csv_header();
std::string results_csv_row(const EpochMetrics& m);
// One epoch as a one-line JSON object (the JSON-lines logger's line, and how checkpoints keep
// the history), and back; the parse throws std::invalid_argument naming a missing key.
std::string epoch_metrics_json(const EpochMetrics& m);
EpochMetrics parse_epoch_metrics_json(const std::string& json);

}  // namespace bareyolo::models
