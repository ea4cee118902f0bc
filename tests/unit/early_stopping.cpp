// tests/unit/early_stopping.cpp — YOLOv5's EarlyStopping (models/train/early_stopping.h),
// counted in validations: the count restarts only on a strictly better fitness, the run stops
// `patience` validations after the best, and patience 0 never stops.
#include "models/train/early_stopping.h"

#include <doctest/doctest.h>

using namespace bareyolo::models;

TEST_CASE("early stopping: patience validations after the strictly best fitness") {
  const EarlyStopping stopping{3};
  TrainingProgress progress;
  const double fitness[] = {0.1, 0.2, 0.2, 0.15, 0.19, 0.3};
  int stopped_at = -1;
  for (int epoch = 0; epoch < 6 && stopped_at < 0; ++epoch)
    if (stopping.update(epoch, fitness[epoch], progress)) stopped_at = epoch;
  CHECK(stopped_at == 4);  // 3 validations after epoch 1's 0.2 (the tie at 2 does not count)
  CHECK(progress.best_epoch == 1);
  CHECK(progress.best_fitness == 0.2);
  CHECK(progress.validations_since_best == 3);
}

TEST_CASE("early stopping: a better fitness restarts the count, patience 0 never stops") {
  TrainingProgress progress;
  const EarlyStopping stopping{2};
  CHECK_FALSE(stopping.update(0, 0.1, progress));
  CHECK_FALSE(stopping.update(1, 0.1, progress));
  CHECK_FALSE(stopping.update(2, 0.5, progress));  // better: the count starts again at epoch 2
  CHECK_FALSE(stopping.update(3, 0.4, progress));
  CHECK(stopping.update(4, 0.4, progress));

  TrainingProgress never;
  for (int epoch = 0; epoch < 50; ++epoch) CHECK_FALSE(EarlyStopping{0}.update(epoch, 0, never));
}

TEST_CASE("early stopping counts validations, not epochs: epochs between them do not count") {
  // Validated at epochs 0, 5 and 10 only (as with sparse validation): two validations without
  // improvement after epoch 0 stop a patience-2 run, however many epochs lie between.
  TrainingProgress progress;
  const EarlyStopping stopping{2};
  CHECK_FALSE(stopping.update(0, 0.5, progress));
  CHECK_FALSE(stopping.update(5, 0.4, progress));  // 5 epochs after the best, 1 validation
  CHECK(stopping.update(10, 0.4, progress));
}
