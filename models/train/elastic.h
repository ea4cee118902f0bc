// models/train/elastic.h — elastic restarts: where a job that lost a worker starts again.
//
// A failed worker ends the job (every rank of a data-parallel step needs every other), but it
// need not end the run. Whoever restarts the job continues the same run from its newest
// checkpoint, weights/last.safetensors (written at every --save-steps step and at every
// epoch's end), as `--resume` would; with no checkpoint yet, the run starts over in its own
// directory. Two restarters:
//   - bareyolo's launcher, with --max-restarts N (launch.cpp: spawn_ranks): after a worker
//     fails it stops the others, logs the cause and the checkpoint's position, and launches
//     the job again, at most N times;
//   - torchrun --max-restarts: it restarts the workers itself with TORCHELASTIC_RESTART_COUNT
//     > 0. Rank 0 then finds the run its job started (not a new `exp2`) by the job's
//     TORCHELASTIC_RUN_ID, which the first start recorded in the run directory.
#pragma once

#include <optional>
#include <string>

#include "models/train/options.h"

namespace bareyolo::models {

// The request of the job's next start after a failure: `request` resumed from the newest
// checkpoint of its run directory (resolved_request: the checkpoint's configuration, the
// request's launch), or unchanged when there is none. `position`, when given, gets what a log
// line says about it: "from <path> (epoch E, optimizer step S)" or "from the start: ...".
TrainOptions continue_run(const TrainOptions& request, std::string* position = nullptr);

// The file in a run directory that names the torchrun job (TORCHELASTIC_RUN_ID) that owns it.
inline constexpr const char* kElasticRunIdFile = "torchelastic_run_id";

// Records in `run_dir` that torchrun job `run_id` trains it (atomically written).
void record_elastic_run(const std::string& run_dir, const std::string& run_id);

// The run directory under `project` that torchrun job `run_id` recorded, the most recently
// recorded when several did (torchrun's default id "none" is shared by every job that does not
// choose one); nothing when none did.
std::optional<std::string> find_elastic_run(const std::string& project, const std::string& run_id);

}  // namespace bareyolo::models
