// engine/optim/schedule.cpp — see schedule.h.
#include "engine/optim/schedule.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace bareyolo {

namespace {
// np.interp over the points (0, from) and (end, to), clamped at the ends.
double ramp(int64_t iteration, int64_t end, double from, double to) {
  const double t = std::clamp(double(iteration) / double(end), 0.0, 1.0);
  return from + t * (to - from);
}
// Python's round(): half to even.
int round_half_even(double x) { return static_cast<int>(std::nearbyint(x)); }
}  // namespace

int accumulation_steps(int batch, int nbs) {
  return std::max(round_half_even(double(nbs) / batch), 1);
}

Schedule::Schedule(const ScheduleHyp& hyp, int epochs, int64_t batches_per_epoch, int batch,
                   int nbs)
    : hyp_(hyp),
      epochs_(epochs),
      batches_per_epoch_(batches_per_epoch),
      warmup_(std::max<int64_t>(std::llround(hyp.warmup_epochs * double(batches_per_epoch)), 100)),
      nbs_over_batch_(double(nbs) / batch),
      accumulate_(accumulation_steps(batch, nbs)) {
  if (epochs < 1 || batches_per_epoch < 1 || batch < 1 || nbs < 1)
    throw std::invalid_argument(
        "Schedule: epochs, batches per epoch, batch and nbs must be "
        "positive (got " +
        std::to_string(epochs) + ", " + std::to_string(batches_per_epoch) + ", " +
        std::to_string(batch) + ", " + std::to_string(nbs) + ")");
}

double Schedule::lr_factor(int epoch) const {
  const double x = epoch;
  if (hyp_.cosine) return ((1 - std::cos(M_PI * x / epochs_)) / 2) * (hyp_.lrf - 1) + 1;
  return (1 - x / epochs_) * (1 - hyp_.lrf) + hyp_.lrf;
}

StepSettings Schedule::at(int64_t iteration) const {
  const int epoch = static_cast<int>(iteration / batches_per_epoch_);
  const double target = hyp_.lr0 * lr_factor(epoch);
  if (iteration <= warmup_) {
    const int accumulate =
        std::max(1, round_half_even(ramp(iteration, warmup_, 1.0, nbs_over_batch_)));
    return {ramp(iteration, warmup_, hyp_.warmup_bias_lr, target),
            ramp(iteration, warmup_, 0.0, target),
            ramp(iteration, warmup_, hyp_.warmup_momentum, hyp_.momentum), accumulate};
  }
  // Warmup ended in this epoch: its last values (this epoch's target) hold until the end.
  const bool warmup_ended_this_epoch = warmup_ >= int64_t(epoch) * batches_per_epoch_;
  const double lr = warmup_ended_this_epoch ? target : hyp_.lr0 * lr_factor(std::max(epoch - 1, 0));
  return {lr, lr, hyp_.momentum, accumulate_};
}

void apply(const StepSettings& settings, Optimizer& optimizer) {
  for (int g = 0; g < Optimizer::kGroups; ++g) {
    Optimizer::Group& group = optimizer.group(g);
    group.lr = g == optimizer_group_index(ParamGroup::bias) ? settings.bias_lr : settings.lr;
    group.momentum = settings.momentum;
  }
}

}  // namespace bareyolo
