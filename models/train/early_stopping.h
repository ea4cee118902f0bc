// models/train/early_stopping.h — YOLOv5's EarlyStopping, decided in this one place, counted in
// validations: the run stops once `patience` validations have passed since the one with the
// best fitness, where "best" means strictly better than every earlier one (a tie does not reset
// the count). An epoch that was not validated (--no-val) has no fitness and does not count, so
// with --no-val, where only the last epoch is validated, the run never stops early. The best
// fitness, its epoch and the count live in TrainingProgress, so they survive a resume.
#pragma once

#include "models/train/checkpoint.h"

namespace bareyolo::models {

struct EarlyStopping {
  int patience = 0;  // validations without improvement; 0 or less: never stop early

  // Records the fitness of validated `epoch` in `progress`; true when the run stops after it.
  bool update(int epoch, double fitness, TrainingProgress& progress) const {
    if (fitness > progress.best_fitness) {
      progress.best_fitness = fitness;
      progress.best_epoch = epoch;
      progress.validations_since_best = 0;
    } else {
      ++progress.validations_since_best;
    }
    return patience > 0 && progress.validations_since_best >= patience;
  }
};

}  // namespace bareyolo::models
