// models/train/rank_agreement.h — the ranks of a job agree on their configuration, or none
// starts.
//
// Ranks that a launcher started (torchrun, srun, mpirun, RANK/WORLD_SIZE by hand) each parse
// their own command line. Ranks that differ in what must be common would train at mixed image
// sizes, fail mid-step on a frame of the wrong size (another model), or end one rank with
// "done" and the other with an error (other epochs). So right after they meet, before
// anything is written, every rank publishes its configuration in the store, rank 0 compares
// them field by field with its own, and every rank stops when one differs, with a message
// naming each difference: `rank 1 has --imgsz 128, rank 0 has 64`.
//
// Compared: every saved field of the options (options.h: the recipe, the schedule, each
// hyperparameter, sync-bn, the optimizer) but the paths and a rank's own loader threads; in
// place of the paths (which may differ between machines), the model's parameters (their names
// and shapes, hashed) and the data yaml's contents (hashed); and the launch settings that
// change what the ranks compute together (--amp, --grad-dtype, --tf32, --winograd,
// --max-steps, --max-pixels). Not compared: --weights and --resume, which rank 0 alone decides
// (every rank starts from rank 0's parameters), and --backend and the timeouts, used to meet.
// Ranks forked by bareyolo's own launcher share one command line: they compare only what their
// devices resolve from it (device_configuration).
#pragma once

#include <string>
#include <vector>

#include "engine/distributed/comm/store.h"
#include "models/train/options.h"

namespace bareyolo::models {

struct ConfigurationField {
  std::string name;   // "--imgsz", "hyp lr0", "model"
  std::string value;  // what is compared
  std::string shown;  // what a message shows ("" : the value)
};
// One rank's fields, in a fixed order; or, when the rank could not build them (an unreadable
// data yaml), one field named "error" whose value says why.
using RankConfiguration = std::vector<ConfigurationField>;

// This rank's configuration, as described above, its options resolved for its `device`
// (resolved_for: an unset --amp is the device's default). Builds the model on the CPU, briefly,
// to hash its parameters' names and shapes: well under a second for yolov5s; yolov5x's 86M
// parameters take a few seconds and about 1 GB of host memory.
RankConfiguration rank_configuration(const TrainOptions& options,
                                     const Device& device = Device::cpu());
// Only the fields that differ by device for one command line (the numerics' flags, resolved for
// `device`): what ranks forked by one launcher compare, whose GPUs may be of different models.
RankConfiguration device_configuration(const TrainOptions& options, const Device& device);

// "" when every rank's configuration equals rank 0's; else one sentence naming every field in
// which a rank differs from rank 0 ("rank 1 has --imgsz 128, rank 0 has 64; ..."), and
// every rank that could not build its configuration.
std::string configuration_differences(const std::vector<RankConfiguration>& by_rank);

// Publishes `mine` in the store; rank 0 reads every rank's, compares and publishes its
// verdict. Throws std::invalid_argument with configuration_differences() on every rank when
// they differ.
void agree_on_configuration(dist::Store& store, int rank, int world_size,
                            const RankConfiguration& mine);

}  // namespace bareyolo::models
