// models/train/trainer.h — YOLOv5's training recipe (`bareyolo train` and the C++ API).
//
// One epoch: the sampler's global sequence in batches; per batch, the Solver's step
// (solver.h): warmup/LR/momentum and accumulation from the schedule, a training forward,
// YOLOv5's loss and backward, and every `accumulate` batches gradient-norm clipping at 10, an
// optimizer step (SGD or AdamW) and an EMA update. After each epoch the
// EMA weights are validated (mAP50, mAP50-95, val losses), fitness = 0.1 mAP50 + 0.9
// mAP50-95 picks the best and drives early stopping (--patience), and the run directory gets
//   weights/last.safetensors, best.safetensors   checkpoints (checkpoint.h), model.* = EMA;
//                                                stripped to fp16 weights once it finished
//   weights/epoch<N>, step<N>.safetensors         periodic checkpoints (--save-period/-steps)
//   weights/final.safetensors                    the best weights alone, once training finished
//   results.csv, results.jsonl, report.html      per-epoch metrics (callbacks.h, outputs/report.h)
//
// Resuming (options.resume) restores every tensor and counter of the checkpoint, including
// the position inside an epoch, and continues with the checkpoint's configuration in its run
// directory: on the CPU the weights end bit for bit as in an uninterrupted run (the data's
// randomness is keyed by (seed, epoch, sample position), so nothing else carries state).
//
// Only rank 0 writes files, prints and fires callbacks (RunContext::rank: the launch resolves
// it, with the run directory, the device and the communicator; run_context.h).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "engine/module.h"
#include "models/train/options.h"
#include "models/train/run_context.h"

namespace bareyolo::models {

struct TrainSummary {
  double best_fitness = 0, best_map50 = 0, best_map50_95 = 0;
  double last_map50 = 0, last_map50_95 = 0;
  int epochs_run = 0;           // epochs completed in this call
  int64_t optimizer_steps = 0;  // in the whole run (a resumed run counts the earlier ones)
  double seconds = 0;
  bool finished = false;  // false: --max-steps ended it with a resumable checkpoint
  std::string run_dir;
  bool rank0 = true;  // false on the other ranks of a data-parallel run (they report nothing)
};

// Trains rank `run.rank` of the run `request` describes; progress lines go to `log` (rank 0
// only). models/train/launch.h resolves `run`.
TrainSummary train(const TrainOptions& request, const RunContext& run,
                   const std::function<void(const std::string&)>& log);
// One process on the CPU: in request.run_dir, or with --resume in the checkpoint's run.
TrainSummary train(const TrainOptions& request, const std::function<void(const std::string&)>& log);

}  // namespace bareyolo::models
