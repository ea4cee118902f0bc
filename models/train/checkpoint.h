// models/train/checkpoint.h — training checkpoints: one safetensors file that is both the weights
// to use and everything needed to continue the run bit for bit.
//
//   tensors   model.*                   the EMA weights (YOLOv5's names: what val/predict load)
//             train.model.*             the raw training weights and BN buffers
//             optimizer.<buffer>.<name> optimizer state (momentum_buffer.*, or AdamW's
//                                       exp_avg.* / exp_avg_sq.*), trainable entries only
//   metadata  format, nc, names          as in plain weights files
//             checkpoint               "1": this file can be resumed from
//             progress                 JSON: epoch, batches of it done, optimizer steps, last
//                                      step's iteration, running loss means, best fitness, its
//                                      epoch and the validations since (patience), finished
//             ema_updates, optimizer, optimizer_steps   the Solver's counters (solver.h)
//             sampler                  JSON: epoch and batch index to continue at
//             rng                      JSON: the seed; every random draw of training is keyed
//                                      by (seed, epoch, sample position), so the position
//                                      above is the whole RNG state
//             config                   JSON: the resolved TrainOptions (options.h)
//             history                  JSON array: the finished epochs' metrics
//             launch                   JSON: the devices asked for (device, nproc_per_node) and
//                                      the world size they gave; absent before 2026-12-05
//
// Writes are atomic (engine/atomic_file.h): a failed write throws and leaves the previous
// file at that path intact.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/module.h"
#include "engine/safetensors.h"
#include "models/train/callbacks.h"
#include "models/train/options.h"

namespace bareyolo::models {

// How far the epoch in progress has come: reset whole when an epoch ends.
struct EpochProgress {
  int64_t batches_done = 0;         // = batches per epoch once its training is done
  double loss_mean[3] = {0, 0, 0};  // box, obj, cls running means over batches_done
  double train_seconds = 0;         // of this epoch's batches so far (step time)
};

// The trainer's position in the run (the Solver keeps its own: SolverState).
struct TrainingProgress {
  int epoch = 0;  // the epoch in progress
  EpochProgress this_epoch;
  double best_fitness = -1;  // EarlyStopping: strict improvement over this
  int best_epoch = 0;
  // Validations since best_epoch's (EarlyStopping). Checkpoints written before it was saved
  // give the count of validated epochs in their history after best_epoch.
  int validations_since_best = 0;
  bool finished = false;  // the run ended (all epochs or early stop): nothing to resume
};

// The Solver's counters (solver.h): where the optimizer stands. The optimizer's step count is
// saved twice, as the format has always had it: in "progress" (optimizer_steps) and in the
// metadata (optimizer_updates); the Solver writes both from the optimizer and restores from the
// latter.
struct SolverState {
  int64_t optimizer_steps = 0;       // in the whole run
  int64_t last_step_iteration = -1;  // iteration (batch + epoch * batches) of the last step
  int64_t ema_updates = 0;
  std::string optimizer;  // "SGD" or "AdamW"
  int64_t optimizer_updates = 0;
};

// The devices a run was started on, which --resume asks for again unless the request names
// devices itself: the request's --device and --nproc-per-node as given (so "cpu" resumes as
// one process) and the world size they resolved to (a resumed run on another is noted). And
// the launch's numerics, which a resumed run always keeps (the CLI refuses a flag that would
// change them): the uninterrupted run's numbers need its precision and algorithms.
struct SavedLaunch {
  std::string device = "auto";
  int nproc_per_node = 0;
  int world_size = 1;
  bool amp = false, tf32 = false, winograd = true, bf16_grad_buckets = false;
  bool cudnn_deterministic = true;  // --cudnn; a checkpoint from before it: deterministic
};

// The non-tensor contents.
struct CheckpointInfo {
  TrainingProgress progress;
  SolverState solver;
  std::string config_json;  // options_to_json (options.h)
  std::vector<EpochMetrics> history;
  int nc = 0;
  std::vector<std::string> names;
  uint64_t seed = 0;
  std::string cfg;   // the model yaml's path (metadata "cfg")
  std::string yaml;  // its text (metadata "yaml"): what a resume or `val` without --cfg builds
  // nullopt in checkpoints written before it was saved: they resume on the request's devices.
  std::optional<SavedLaunch> launch;
};

// Where the tensors come from when saving and go to when restoring.
struct CheckpointTensors {
  std::vector<StateEntry> ema;    // model.*: the EMA's values under the model's names
  std::vector<StateEntry> model;  // train.model.*
  std::vector<std::pair<std::string, Tensor*>> optimizer;  // optimizer.<name>
};

inline constexpr const char* kTrainingModelPrefix = "train.";
inline constexpr const char* kOptimizerPrefix = "optimizer.";

SafetensorsFile make_checkpoint(const CheckpointTensors& tensors, const CheckpointInfo& info);
// Weights alone (weights/final.safetensors): model.* and format/nc/names.
// `cfg` and `yaml`: the model yaml's path and text, saved as metadata "cfg" and "yaml" so that
// bareyolo::Model and every command can rebuild the network from the file alone.
SafetensorsFile make_weights_file(const std::vector<StateEntry>& weights, int nc,
                                  const std::vector<std::string>& names,
                                  const std::string& cfg = "", const std::string& yaml = "");

// A finished run's checkpoint as YOLOv5's strip_optimizer leaves its last.pt and best.pt: the
// EMA weights (model.*) alone, floats in fp16, with the weights metadata (format, cfg, yaml,
// nc, names) and "finished_epochs" (the epochs the run trained), by which --resume of it says
// that the run finished rather than that the file is not a checkpoint.
SafetensorsFile stripped_checkpoint(const SafetensorsFile& checkpoint, const std::string& source);

// Reads a checkpoint's metadata; throws std::invalid_argument naming `source` when it is
// plain weights (not resumable; a finished run's stripped checkpoint says so) or a field is
// missing.
CheckpointInfo read_checkpoint_info(const SafetensorsFile& file, const std::string& source);
// Copies every tensor back; checks all names and shapes before copying anything.
void restore_checkpoint(const SafetensorsFile& file, const CheckpointTensors& tensors,
                        const std::string& source);

// --resume PATH: the checkpoint and its contents; refused (naming PATH) when that run already
// finished — there is nothing to continue, and its weights start a new run with --weights.
struct Resume {
  SafetensorsFile file;
  CheckpointInfo info;
};
Resume open_resume(const std::string& path);
// The options a run trains with: `request`, or for --resume the checkpoint's saved
// configuration (options.h says what is saved) with the request's resume_changes (fewer epochs
// than the run's are refused), launch, max_steps, callbacks and display, in the checkpoint's
// run directory (wherever it has moved). The launch is the request's when it names devices
// (a device other than "auto", or nproc_per_node), else the run's SavedLaunch; the numerics
// (--amp, --tf32, --winograd, --grad-dtype) are always the run's. Every process
// of a job resolves its request this way before the launch plans the batch.
TrainOptions resolved_request(const TrainOptions& request);

// Refuses options that are not the checkpoint's configuration (resolved_request was skipped).
void check_resolved(const CheckpointInfo& info, const std::string& source,
                    const TrainOptions& options);

// Refuses a checkpoint this run cannot continue: saved by another optimizer than its
// configuration names, or at a position that `batches_per_epoch` x the epochs does not have
// (the dataset changed).
void check_resume_fits(const CheckpointInfo& info, const std::string& source,
                       const TrainOptions& options, int64_t batches_per_epoch);

// Deletes the oldest periodic checkpoints (epoch<N>/step<N>.safetensors) in `weights_dir`
// beyond the newest `keep` (by modification time, then name); returns the removed paths.
std::vector<std::string> prune_periodic_checkpoints(const std::string& weights_dir, int keep);

}  // namespace bareyolo::models
