// models/trainer.h — YOLOv5's training recipe on one process (`bareyolo train`).
//
// One epoch: the sampler's global sequence in batches; per batch, warmup/LR/momentum and
// accumulation from the schedule (engine/optim/schedule.h), a training forward, YOLOv5's
// loss and backward, and every `accumulate` batches gradient-norm clipping at 10, an SGD
// step and an EMA update. After each epoch the EMA weights are validated (mAP50,
// mAP50-95), fitness = 0.1 mAP50 + 0.9 mAP50-95 picks the best, and the run directory gets
// weights/last.safetensors, weights/best.safetensors (the EMA's, as YOLOv5 saves them) and
// a results.csv row. Data parallelism, checkpoints with optimizer state and resume come with
// the distributed runtime (the project's issues).
#pragma once

#include <functional>
#include <string>

#include "data/augment_hyp.h"
#include "engine/optim/schedule.h"
#include "models/loss.h"

namespace bareyolo::models {

struct TrainOptions {
  std::string data;  // dataset yaml
  std::string cfg;   // model yaml
  std::string weights;  // initial weights (.safetensors); empty: from scratch
  std::string run_dir;  // outputs (created)
  int epochs = 100, batch = 16, imgsz = 640, workers = 2, nbs = 64, patience = 100;
  uint64_t seed = 0;
  int64_t max_steps = 0;  // stop after this many optimizer steps (0: no limit)
  bool validate = true;   // validate every epoch (else only after the last)
  LossHyp loss;
  ScheduleHyp schedule;
  data::AugmentHyp augment;
  double weight_decay = 5e-4;
};

struct TrainSummary {
  double best_fitness = 0, best_map50 = 0, best_map50_95 = 0;
  double last_map50 = 0, last_map50_95 = 0;
  int epochs_run = 0;
  int64_t optimizer_steps = 0;
  double seconds = 0;
};

// Trains; progress lines go to `log` (one per epoch and per few batches).
TrainSummary train(const TrainOptions& options,
                   const std::function<void(const std::string&)>& log);

}  // namespace bareyolo::models
