// models/train/callbacks.h — what a training run tells the outside world, and the built-in loggers.
//
// TrainCallbacks is a set of optional hooks (std::function, empty = not called). The trainer
// fires them on rank 0 only, in this order:
//   on_train_start(info)          once, after setup (info.history: epochs done before a resume)
//   per epoch:
//     on_train_epoch_start(info)  before its first batch
//     on_train_batch_end(info)    after each batch (and its optimizer step, when it made one)
//     on_epoch_end(epoch)         after the epoch's last batch, before validation
//     on_val_end(report)          after validation, when the epoch was validated
//     on_fit_epoch_end(metrics)   the epoch's row of results.csv
//     on_model_save(path)         after each checkpoint file is written, which happens in the
//                                 background (checkpointer.h): reported at a later step, and
//                                 at the latest before the next on_epoch_end or on_train_end
//   on_train_end(info)            once, when the run ends (finished, stopped early or --max-steps)
// A hook that throws stops the run with its error (checkpoints already written stay intact).
// Callbacks fire in the order they were registered: the built-in outputs (progress bar,
// console lines, report.html, results.csv, results.jsonl: models/train/outputs/ and below),
// then the user's.
//
// The built-in loggers are ordinary TrainCallbacks: results.csv (YOLOv5's columns) and a
// JSON-lines file (one object per epoch with every field of EpochMetrics). Both rewrite the
// history of a resumed run at on_train_start, so rows written after the checkpoint the run
// resumed from (a killed epoch's) disappear.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "data/batch.h"
#include "models/eval/confusion_matrix.h"
#include "models/eval/metrics.h"

namespace bareyolo::models {

// One epoch's numbers: YOLOv5's results.csv row plus timing and fitness.
struct EpochMetrics {
  int epoch = 0;                                       // 0-based, as YOLOv5's results.csv
  double train_box = 0, train_obj = 0, train_cls = 0;  // running means over the epoch
  double precision = 0, recall = 0, map50 = 0, map50_95 = 0;
  double val_box = 0, val_obj = 0, val_cls = 0;
  double lr0 = 0, lr1 = 0, lr2 = 0;  // the optimizer groups' lr at the epoch's last batch
  double fitness = 0;                // 0.1 mAP50 + 0.9 mAP50-95
  // false: --no-val skipped this epoch's validation; its validation numbers and fitness are
  // then 0 here, empty in results.csv and null in the JSON
  bool validated = false;
  // Wall time. An epoch's record covers the time since the previous record (the run's start
  // first): its training steps, its validation, and the checkpoints written since that record
  // (the previous epoch's end-of-epoch ones come after its record, so they count here), plus
  // the hooks' time; step_seconds is train_seconds per batch.
  double epoch_seconds = 0, train_seconds = 0, val_seconds = 0, checkpoint_seconds = 0;
  double step_seconds = 0;
  // The fraction of the epoch's training time each rank waited for the loader's next batch;
  // data_wait (results.csv's x/data_wait) is the largest, the rank the input pipeline limits.
  std::vector<double> data_wait_per_rank = {};
  double data_wait = 0;
  // This rank's host waits on the device inside the epoch's steps, per optimizer step
  // (kernels/step_guard.h): 0 on the CPU and the goal on a GPU (results.jsonl's host_waits).
  double host_waits = 0;
};

// What the run is, as it starts.
struct TrainStartInfo {
  std::string run_dir;
  int start_epoch = 0, epochs = 0;
  std::vector<EpochMetrics> history;   // epochs finished before a resume
  std::string cfg;                     // the model yaml
  int64_t parameters = 0, images = 0;  // of the model; of the training split
  std::vector<std::string> names;      // class names (their count is nc)
  int imgsz = 0, batch = 0, accumulate = 1;
  std::string optimizer;  // "SGD" or "AdamW"
  bool resumed = false;   // continues a checkpoint, from start_epoch's batch resume_batch
  int64_t resume_batch = 0;
  std::string config_json;  // the resolved configuration (options_to_json)
};

struct EpochStartInfo {
  int epoch = 0, epochs = 0;
  int64_t batches = 0, batches_done = 0;  // of the epoch; > 0 when a resume starts inside it
};

struct BatchEndInfo {
  int epoch = 0;
  int64_t batches_done = 0;            // of the epoch
  double loss_mean[3] = {0, 0, 0};     // box, obj, cls: running means over the epoch
  int64_t instances = 0;               // labels in this batch
  int image_size = 0;                  // the width the model took it at
  int64_t optimizer_steps = 0;         // in the whole run
  const data::Batch* batch = nullptr;  // this rank's batch as trained; valid during the call
};

// One validation of the EMA: the metrics behind the validation table.
struct ValidationReport {
  int epoch = 0;
  DetectionMetrics metrics = {};
  int64_t images = 0, labels = 0;
  ConfusionMatrix confusion = {};
};

struct TrainEndInfo {
  std::string run_dir;
  int epochs_run = 0;
  bool finished = false;  // all epochs (or early stopping); false after --max-steps
  double best_fitness = 0;
  int64_t optimizer_steps = 0;  // in the whole run
  bool stopped_early = false;   // by --patience, before the last epoch
  int best_epoch = 0, patience = 0;
  std::string trace;  // the --trace file rank 0 wrote; "" without
};

struct TrainCallbacks {
  std::function<void(const TrainStartInfo&)> on_train_start;
  std::function<void(const EpochStartInfo&)> on_train_epoch_start;
  std::function<void(const BatchEndInfo&)> on_train_batch_end;
  std::function<void(int epoch)> on_epoch_end;
  std::function<void(const ValidationReport&)> on_val_end;
  std::function<void(const EpochMetrics&)> on_fit_epoch_end;
  std::function<void(const std::string& path)> on_model_save;
  std::function<void(const TrainEndInfo&)> on_train_end;
};

// results.csv: header + one row per epoch, YOLOv5's columns (epoch, train/box_loss, ...,
// x/lr2), flushed after every row; an epoch that was not validated has its validation columns
// (metrics/*, val/*) empty.
TrainCallbacks csv_logger(const std::string& path);
// One JSON object per line per epoch, every EpochMetrics field by name (the validation numbers
// and fitness null for an epoch that was not validated).
TrainCallbacks jsonl_logger(const std::string& path);

// The CSV text pieces (shared with tests and report readers).
std::string results_csv_header();
std::string results_csv_row(const EpochMetrics& m);
// One epoch as a one-line JSON object (the JSON-lines logger's line, and how checkpoints keep
// the history), and back; the parse throws std::invalid_argument naming a missing key.
std::string epoch_metrics_json(const EpochMetrics& m);
EpochMetrics parse_epoch_metrics_json(const std::string& json);

}  // namespace bareyolo::models
