// models/train/early_stopping.h — YOLOv5's EarlyStopping, decided in this one place: the run
// stops once `patience` epochs have passed since the epoch of the best fitness, where "best"
// means strictly better than every earlier epoch (a tie does not reset the count). The best
// fitness and its epoch live in TrainingProgress, so they survive a resume.
#pragma once

#include "models/train/checkpoint.h"

namespace bareyolo::models {

struct EarlyStopping {
  int patience = 0;  // epochs without improvement; 0 or less: never stop early

  // True when `epoch` ends the run unless its fitness beats the best: such an epoch is
  // validated even under --no-val, because the decision needs its fitness.
  bool may_stop_after(int epoch, const TrainingProgress& progress) const {
    return patience > 0 && epoch - progress.best_epoch >= patience;
  }
  // Records `epoch`'s fitness in `progress`; true when the run stops after it.
  bool update(int epoch, double fitness, TrainingProgress& progress) const {
    if (fitness > progress.best_fitness) {
      progress.best_fitness = fitness;
      progress.best_epoch = epoch;
    }
    return may_stop_after(epoch, progress);
  }
};

}  // namespace bareyolo::models
