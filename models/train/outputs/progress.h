// models/train/outputs/progress.h — the per-epoch progress display of rank 0.
//
// On a terminal it is a tqdm-like bar redrawn in place with '\r' (at most 10 times a second):
//       Epoch       RSS   box_loss   obj_loss   cls_loss  Instances       Size
//        3/30     0.41G    0.08412    0.05731    0.02403         87        128  45%|####5     |
//        9/20 [00:03<00:04, 2.85it/s]
// (RSS = resident memory of this process). Elsewhere (a log file, CI) the same row is printed
// as a plain line every tenth of the epoch and at least every 30 s, so logs stay short.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

#include "models/train/callbacks.h"

namespace bareyolo::models {

struct ProgressFields {
  double box = 0, obj = 0, cls = 0;  // running means
  int64_t instances = 0;             // labels in the latest batch
  int size = 0;                      // its image size
};

class ProgressBar {
 public:
  // `epoch_label` e.g. "3/30"; `total` batches in the epoch, `start` already done (resume).
  ProgressBar(std::FILE* out, bool interactive, std::string epoch_label, int64_t total,
              int64_t start = 0);
  // After `done` batches of the epoch.
  void update(int64_t done, const ProgressFields& fields);
  // Ends the bar's line (a terminal's, or a last plain line if not printed yet).
  void finish();

  static std::string header();

 private:
  std::string row(int64_t done, const ProgressFields& fields) const;

  std::FILE* out_;
  bool interactive_;
  std::string label_;
  int64_t total_, start_;
  std::chrono::steady_clock::time_point began_, last_draw_;
  int64_t last_done_ = -1, last_printed_decile_ = -1;
  bool drawn_ = false;
  ProgressFields last_fields_;
};

// The bar as callbacks (callbacks.h): the header and a new bar at each epoch's start, a redraw
// after each batch, the end of its line when the epoch (or the run, mid-epoch) ends.
TrainCallbacks progress_bar(std::FILE* out);

bool is_terminal(std::FILE* stream);
// Resident set size of this process in bytes (/proc/self/statm; 0 where unavailable).
int64_t resident_memory_bytes();
// A duration as the bar shows it: "mm:ss", or "h:mm:ss" from an hour on (exposed for tests).
std::string clock_text(double seconds);

}  // namespace bareyolo::models
