// models/train/run_context.cpp — see run_context.h.
#include "models/train/run_context.h"

#include "data/sampler.h"
#include "engine/optim/schedule.h"

namespace bareyolo::models {

BatchPlan plan_batch(int global_batch, int world_size, int nbs) {
  data::require_divisible_batch(global_batch, world_size);
  return {.global = global_batch,
          .per_rank = global_batch / world_size,
          .accumulate = accumulation_steps(global_batch, nbs)};
}

}  // namespace bareyolo::models
