// models/train/run_context.h — what the launch resolves for one rank (launch.h), apart from
// what the user asked for (TrainOptions, options.h): where the run's outputs go, which rank
// this process is, its device and the job's communicator. The request is handed to the
// trainer as the user wrote it (AutoBatch aside: `--batch -1` becomes a number first).
#pragma once

#include <string>

#include "kernels/view.h"

namespace bareyolo::dist {
struct ProcessGroup;
}

namespace bareyolo::models {

struct RunContext {
  // The run directory, resolved once (by the launcher or rank 0) and shared with every rank:
  // <project>/<name>[N] for a new run, the checkpoint's run for --resume.
  std::string run_dir;
  int rank = 0, world_size = 1;  // rank 0 alone writes files, prints and fires callbacks
  Device device = Device::cpu();
  dist::ProcessGroup* group = nullptr;  // the job's communicator; null: one process
};

}  // namespace bareyolo::models
