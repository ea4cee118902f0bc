// models/train/options.h — everything a training run is configured by (the C++ API of
// `bareyolo train`), YOLOv5's hyperparameter yaml (--hyp), and the resolved configuration as
// JSON, which checkpoints carry so that --resume continues with the original settings.
//
// What is NOT part of the saved configuration: max_steps (a resumed run continues to the
// configured epochs), resume, the launch (device, ranks, backend, timeout, rank, world_size:
// a resumed run is launched anew, on the devices the checkpoint's SavedLaunch names unless the
// request names others: checkpoint.h), where a new run goes, callbacks, show_progress and
// which outputs are written (plots, tensorboard, nosave).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "data/augment_hyp.h"
#include "data/image.h"  // defines: kDefaultMaxPixels
#include "engine/optim/schedule.h"
#include "kernels/view.h"
#include "models/loss/loss.h"
#include "models/train/callbacks.h"
#include "models/train/gated_defaults.h"

namespace bareyolo::models {

enum class OptimizerKind { sgd, adam, adamw };

// --cuda-graph: whether the Solver records each kind of training step as one CUDA graph and
// replays it (kernels/step_graph.h). auto: where it can, one process on a GPU whose batches keep
// their shape (several ranks' steps with NCCL's collectives too once a GPU run opens that gate:
// gated_defaults.h); on: the same, and several ranks' steps with their NCCL collectives, refused
// with the reason where it cannot; off: every kernel launched.
enum class CudaGraphMode { automatic, on, off };

// --channels-last: the model's activations and their gradients in channels last (NHWC,
// Graph::set_channels_last) rather than NCHW: on the CPU the same numbers (its kernels read NCHW
// copies of the views: kernels/nchw_adapter.h), on a GPU every op's own channels-last kernel.
// auto: channels last on a GPU once a GPU run has checked those kernels (gated_defaults.h; NCHW
// until then), NCHW on the CPU; on: channels last; off: NCHW.
enum class ChannelsLastMode { automatic, on, off };

// `--device` as the C++ API takes it: a string, one CUDA index, or a list of indices.
struct DeviceArg {
  std::string text = "auto";
  DeviceArg() = default;
  DeviceArg(const char* device) : text(device) {}
  DeviceArg(std::string device) : text(std::move(device)) {}
  DeviceArg(int index) : text(std::to_string(index)) {}
  DeviceArg(std::initializer_list<int> indices) {
    text.clear();
    for (int i : indices) text += (text.empty() ? "" : ",") + std::to_string(i);
  }
};

// TrainOptions::workers: as many loader threads as the rank's device needs and its cores allow.
constexpr int kAutoWorkers = -1;

// What a --resume request changes in the run's saved configuration: only what leaves the run
// what it was. More epochs continue it further (the learning-rate schedule stretches from the
// resumed step on); the loader's thread count changes no result. Unset: the run's.
struct ResumeChanges {
  std::optional<int> epochs;  // at least the run's
  std::optional<int> workers;
};

struct TrainOptions {
  std::string data;     // dataset yaml
  std::string cfg;      // model yaml
  std::string weights;  // initial weights (.safetensors); empty: from scratch
  std::string run_dir;  // outputs (created); empty: <project>/<name>, resolved by the launch
  int epochs = 100, batch = 16, imgsz = 640, nbs = 64, patience = 100;
  int workers = kAutoWorkers;  // loader threads per rank; see loader_workers()
  uint64_t seed = 0;
  bool validate = true;  // validate every epoch (else only the final one)
  // --rect: YOLOv5's rectangular batches (aspect-ratio order, no shuffle, no mosaic);
  // --multi-scale: every step's batch resized to a random size (data/train_batches.h).
  bool rect = false, multi_scale = false;
  OptimizerKind optimizer = OptimizerKind::sgd;
  int freeze = 0;  // the first `freeze` model layers (model.0. ... model.<freeze-1>.) are frozen
  int save_period = 0;       // weights/epoch<N>.safetensors every N epochs (0: never)
  int64_t save_steps = 0;    // weights/step<N>.safetensors every N optimizer steps (0: never)
  int save_total_limit = 0;  // keep the newest this many periodic checkpoints (0: all)
  LossHyp loss;
  ScheduleHyp schedule;
  data::AugmentHyp augment;
  double weight_decay = 5e-4;  // before YOLOv5's batch * accumulate / nbs scaling
  // --single-cls: the dataset trains as one class (data::as_single_class): nc 1, every label
  // class 0, named "item" unless the dataset has one name.
  bool single_cls = false;

  // ---- the launch (models/train/launch.h): not in the configuration; a resumed run is
  // launched anew, by default on the devices it was started on (checkpoint.h: SavedLaunch) ----
  DeviceArg device;              // "auto", "cpu", "0", "0,1", "cuda:0"; or 0; or {0, 1}
  int nproc_per_node = 0;        // CPU ranks; 0: one for "cpu", as many as fit the cores for "auto"
  std::string backend = "auto";  // "auto", "tcp" or "nccl"
  double timeout_s = 3 * 3600;   // bounds every store call and collective of a running job
  double rendezvous_timeout_s = 600;  // bounds joining it (engine/distributed/launch/rendezvous.h)
  // A rank without progress this long is stalled: the job ends naming it (stall_monitor.h);
  // 0: no watch.
  double stall_timeout_s = 300;
  // Restarts of the whole job from the run's newest checkpoint after a worker fails (bareyolo's
  // own launcher: launch.h); 0: the first failure ends the run.
  int max_restarts = 0;
  // TF32 tensor-core math for float convolutions and GEMMs on GPUs (about 1e-3 relative error
  // per product instead of float's 1e-7); off until the GPU check has passed with it on.
  bool tf32 = false;
  // --cudnn deterministic|fast: the GPU's convolutions run the fastest of cuDNN's deterministic
  // algorithms, so a run repeats its bits (YOLOv5's train.py asks PyTorch for the same), or the
  // fastest of all, atomics and all (kernels/cuda/cudnn_conv.cpp times them).
  bool cudnn_deterministic = true;
  // Winograd F(2x2, 3x3) for the CPU's 3x3 stride-1 convolutions where its measured rule picks
  // it (kernels/cpu/winograd.h: fewer multiplications, float results that differ in the last
  // bits); false: im2col + GEMM everywhere.
  bool winograd = true;
  // --amp (true), --no-amp (false): bf16 mixed precision (Graph::set_mixed_precision) for the
  // model's activations and their gradients, which become bf16 tensors; the ops compute in
  // float (cuDNN's bf16 convolutions on tensor cores on a GPU). Unset: the device's default
  // (resolved_for below: float32 until a GPU run opens the gate); the trainer resolves it.
  // Validation runs the EMA model in float32, NCHW, either way.
  std::optional<bool> amp;
  CudaGraphMode cuda_graph = CudaGraphMode::automatic;
  ChannelsLastMode channels_last = ChannelsLastMode::automatic;
  // --cache: "ram" or "disk" decodes the images once into a file every rank of the host maps
  // (data/image_cache.h); "": decoded every epoch.
  std::string cache;
  // Several machines, each running `bareyolo train` with the same flags but its node_rank:
  // global rank = node_rank x ranks per node + local rank. master_port is required then.
  int nnodes = 1, node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;  // 0: one machine, a free port picked by the launcher

  // SyncBatchNorm when distributed: nullopt = on (the model family is BN-heavy), false = per
  // rank statistics (a warning below 16 images per rank). Saved.
  std::optional<bool> sync_bn;
  // The reducer's gradient bucket size in MB (engine/distributed/ddp/reducer.h); 0: sized
  // from the model (ReducerOptions::auto_buckets). Saved.
  double bucket_mb = 0;
  // --grad-dtype bf16: the reducer's buckets travel in bf16 (ReducerOptions::bf16_buckets).
  // Not saved: like the bucket size's effect on speed, a choice of the launch.
  bool bf16_grad_buckets = false;

  // ---- not saved in checkpoints ----
  // --trace FILE: every rank's timeline of optimizer steps [trace_begin, trace_end) as one
  // Chrome trace-event file, written by rank 0 at the end (engine/trace.h); "" = off.
  std::string trace;
  int64_t trace_begin = 1, trace_end = 4;
  std::vector<TrainCallbacks> callbacks;
  int64_t max_steps = 0;  // end after this many optimizer steps in all (0: no limit), resumable
  // AutoAnchor at a new run's start (autoanchor.h); --noautoanchor: off. A resumed run never
  // runs it: its checkpoint holds the anchors it trains with.
  bool autoanchor = true;
  // The hyp file's `anchors` (hyp.VOC.yaml's 3.412): that many anchors per level, rounded, as
  // placeholders for AutoAnchor, in place of the model yaml's; 0: the yaml's. The run's weights
  // carry the anchors it trained with (in their yaml too), which is what a resumed run builds.
  double anchors = 0;
  std::string resume;            // checkpoint to continue from: its run dir and configuration win
  ResumeChanges resume_changes;  // with resume: what the request changes of the configuration
  bool show_progress = true;     // the progress bar (rank 0, on stdout)
  bool plots = true;             // the run's pictures (models/train/outputs/plots.h; --noplots)
  // --nosave: no checkpoint is written before the run ends, then last and best once
  // (checkpointer.h); refused with periodic checkpoints and restarts, which need them.
  bool nosave = false;
  bool tensorboard = true;  // events.out.tfevents.* (outputs/tensorboard.h; --no-tensorboard)
  bool strict = false;      // any problem in the train or val split is an error, not a skip
  int64_t max_pixels = data::kDefaultMaxPixels;  // larger images are skipped (data/image.h)
  // Where a new run's outputs go when run_dir is empty: <project>/<name>, <name>2, ...
  std::string project = "runs/train", name = "exp";
  bool exist_ok = false;
};

// Refuses --nosave beside what needs the checkpoints it leaves out (--save-period,
// --save-steps, --max-restarts), naming both flags.
void check_nosave(const TrainOptions& options);

// The loader threads a rank uses: `workers` when given (not kAutoWorkers); else, on a GPU, one
// per core this process may run on (sched_getaffinity; the launcher gives each rank its block)
// but one, for the thread that drives the GPU, and no more than the rank's batch (the threads
// share a batch's samples); on the CPU, where the compute threads use those cores, 2 (bench_train:
// the loader then builds batches 6x faster than yolov5n@320 trains on them).
int loader_workers(int workers, const Device& device, int per_rank_batch);

// Applies a YOLOv5 hyp yaml (hyp.scratch-low.yaml's keys) to `options`: lr0, lrf, momentum,
// weight_decay, warmup_*, loss gains, augmentation. Keys YOLOv5 keeps but does not use in
// training (iou_t) are accepted; `anchors` sets TrainOptions::anchors; an unknown key, a
// repeated key (flat_yaml.h) and a value outside its meaningful range (NaN and infinities
// included: lr0 > 0, momentum in [0, 1), anchor_t > 1, ...) are errors naming the file, line,
// key and range.
void load_hyp_yaml(const std::string& path, TrainOptions& options);
// The same for the file's text (`path` only names it in messages).
void parse_hyp_yaml(const std::string& yaml_text, const std::string& path, TrainOptions& options);
// Every hyperparameter as YOLOv5's hyp yaml names it, with its value, in YOLOv5's order (what
// a run directory's hyp.yaml lists).
struct HypValue {
  const char* name;
  double value;
};
std::vector<HypValue> hyp_values(const TrainOptions& options);
// The same ranges for options set through the C++ API: throws std::invalid_argument naming the
// hyperparameter, its value and its range.
void check_hyp(const TrainOptions& options);

// The saved part of the options as a JSON object string, and back onto `options` (fields
// not saved are kept). The parse names the key that is missing or mistyped.
std::string options_to_json(const TrainOptions& options);
void options_from_json(const std::string& json, TrainOptions& options);

// The launch's numerics as the flags that set them, each with its value as typed ("--amp",
// "on"; "auto" for an unresolved --amp, which neither --amp nor --no-amp set): not in the saved
// configuration, but what the ranks compute together (rank_agreement.h)
// and what a resumed run keeps (checkpoint.h: SavedLaunch).
struct FlagValue {
  const char* flag;
  std::string value;
};
std::vector<FlagValue> numerics_flags(const TrainOptions& options);

// The collectives of a run's step (several ranks, or one over NCCL): none; NCCL's, which a CUDA
// graph of the step records with it; or another backend's (TCP, shared memory), which it cannot.
enum class StepCollectives { none, recordable, unrecordable };

// Whether the run records its steps (--cuda-graph, resolved): a GPU that can (`graphs_supported`),
// batches of one shape (no --rect, whose batches follow the images' aspect, no --multi-scale), and
// a step without collectives; one with NCCL's only under --cuda-graph on until its gate opens
// (gated_defaults.h: auto launches it kernel by kernel, its replays have not run on a GPU yet).
// --cuda-graph on where that does not hold throws, saying which part fails.
bool records_cuda_graphs(const TrainOptions& options, const Device& device, bool graphs_supported,
                         StepCollectives collectives, const GatedDefaults& gates = kGatedDefaults);

// What a run's device offers that a default depends on.
struct DeviceAbilities {
  bool gpu = false;
  bool bf16_tensor_cores = false;  // a GPU of compute capability 8.0 or newer
};
DeviceAbilities abilities_of(const Device& device);  // asks a GPU its compute capability

// `options` with --amp and --channels-last resolved for the run's device (the trainer's,
// AutoBatch's): each as asked, else the device's default where its gate is open
// (gated_defaults.h) — bf16 mixed precision where it has bf16 tensor cores, channels last on a
// GPU — and float32, NCHW where it is shut.
TrainOptions resolved_for(const TrainOptions& options, const DeviceAbilities& device,
                          const GatedDefaults& gates = kGatedDefaults);
// What resolved options say: whether the run trains in bf16 mixed precision, whether its
// activations are channels last. Each throws std::logic_error for unresolved options.
bool mixed_precision(const TrainOptions& resolved);
bool channels_last(const TrainOptions& resolved);

const char* optimizer_name(OptimizerKind kind);               // "SGD", "Adam", "AdamW"
OptimizerKind parse_optimizer_name(const std::string& name);  // throws for others

}  // namespace bareyolo::models
