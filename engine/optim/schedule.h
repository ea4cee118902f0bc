// engine/optim/schedule.h — YOLOv5's learning-rate schedule, warmup and accumulation, as a
// pure function of the iteration, so a resumed run computes the same values.
//
//   linear  lf(x) = (1 - x / epochs) * (1 - lrf) + lrf
//   cosine  lf(x) = ((1 - cos(pi x / epochs)) / 2) * (lrf - 1) + 1
// YOLOv5 steps its LambdaLR at each epoch's end, and its constructor already applied lf(0):
// after warmup, epoch 0 trains at lr0 * lf(0) and epoch e >= 1 at lr0 * lf(e - 1).
// Warmup (iteration ni <= nw = max(round(warmup_epochs * batches_per_epoch), 100), counted
// from the start of training) moves everything linearly towards this epoch's target:
//   bias lr   warmup_bias_lr -> lr0 * lf(e)      other lrs  0 -> lr0 * lf(e)
//   momentum  warmup_momentum -> momentum        accumulate 1 -> nbs / batch (rounded)
// and after warmup ends mid-epoch the values stay where warmup left them (lr0 * lf(e))
// until that epoch ends.
#pragma once

#include <cstdint>

#include "engine/optim/optimizer.h"

namespace bareyolo {

struct ScheduleHyp {
  double lr0 = 0.01, lrf = 0.01, momentum = 0.937;
  double warmup_epochs = 3.0, warmup_momentum = 0.8, warmup_bias_lr = 0.1;
  bool cosine = false;
};

struct StepSettings {
  double bias_lr, lr;  // optimizer group 0 (biases); groups 1 and 2
  double momentum;
  int accumulate;  // batches whose gradients are summed per optimizer step
};

// An iteration's settings on an optimizer's groups: group 0 (biases) takes bias_lr, groups 1
// and 2 lr; every group the momentum (AdamW does not read it: its beta1 stays fixed).
void apply(const StepSettings& settings, Optimizer& optimizer);

// Batches whose gradients are summed per optimizer step once warm-up is over, so that a step
// sees about nbs images whatever the batch: max(round(nbs / batch), 1), rounding half to even
// as Python does.
int accumulation_steps(int batch, int nbs);

class Schedule {
 public:
  // `batch` is the global batch; nbs the nominal batch size (64).
  Schedule(const ScheduleHyp& hyp, int epochs, int64_t batches_per_epoch, int batch, int nbs);

  // Settings for iteration ni = batch index + batches_per_epoch * epoch.
  StepSettings at(int64_t iteration) const;
  // lf(epoch).
  double lr_factor(int epoch) const;
  int64_t warmup_iterations() const { return warmup_; }
  // max(round(nbs / batch), 1): batches per optimizer step after warmup.
  int accumulate() const { return accumulate_; }

 private:
  ScheduleHyp hyp_;
  int epochs_;
  int64_t batches_per_epoch_, warmup_;
  double nbs_over_batch_;
  int accumulate_;
};

}  // namespace bareyolo
