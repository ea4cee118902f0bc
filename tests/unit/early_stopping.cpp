// tests/unit/early_stopping.cpp — YOLOv5's EarlyStopping (models/train/early_stopping.h): the
// count restarts only on a strictly better fitness, the run stops `patience` epochs after the
// best, the epoch that may stop is known before its validation, and patience 0 never stops.
#include "models/train/early_stopping.h"

#include <doctest/doctest.h>

using namespace bareyolo::models;

TEST_CASE("early stopping: patience epochs after the strictly best fitness") {
  const EarlyStopping stopping{3};
  TrainingProgress progress;
  const double fitness[] = {0.1, 0.2, 0.2, 0.15, 0.19, 0.3};
  int stopped_at = -1;
  for (int epoch = 0; epoch < 6 && stopped_at < 0; ++epoch) {
    CAPTURE(epoch);
    const bool may_stop = stopping.may_stop_after(epoch, progress);
    CHECK(may_stop == (epoch == 4));  // 3 epochs after epoch 1's 0.2 (the tie at 2 does not count)
    if (stopping.update(epoch, fitness[epoch], progress)) stopped_at = epoch;
  }
  CHECK(stopped_at == 4);
  CHECK(progress.best_epoch == 1);
  CHECK(progress.best_fitness == 0.2);
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
