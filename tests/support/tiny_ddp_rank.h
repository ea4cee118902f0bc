// tests/support/tiny_ddp_rank.h — one rank of a data-parallel test step: the tiny model (2
// classes, 64 px) and its Solver over the rank's communicator with SyncBatchNorm, one optimizer
// step per global batch of 2 x 2 images, and this rank's 2 random images.
#pragma once

#include <cstdint>

#include "engine/distributed/launch/process_group.h"
#include "engine/shipped_files.h"
#include "models/train/solver.h"
#include "tests/support/testing.h"

namespace bareyolo::testing {

struct TinyDdpRank {
  static constexpr int kRankBatch = 2;

  models::DetectionModel model{models::load_model_config(shipped_file("models/yolov5-tiny.yaml")),
                               {.nc = 2, .seed = 5}};
  models::Solver solver;
  Tensor images;

  // `seed` + the rank draws the rank's images.
  TinyDdpRank(dist::ProcessGroup& group, uint64_t seed)
      : solver(model,
               {.epochs = 1,
                .batches_per_epoch = 8,
                .batch = 2 * kRankBatch,
                .nbs = 2 * kRankBatch,
                .loss = {models::scale_loss_gains({}, 3, 2, 64), 2},
                .sync_bn = true},
               group.comm.get()) {
    Rng rng(seed + uint64_t(group.rank()));
    images = Tensor::from_vector(random_vector<float>(rng, kRankBatch * 3 * 64 * 64, 0, 1),
                                 {kRankBatch, 3, 64, 64});
  }
};

}  // namespace bareyolo::testing
