// models/train/solver.h — the one owner of a training step (Caffe's Solver): every optimizer
// step bareyolo takes runs here — the trainer's, bench_train's, bench_gpu_train's and the
// selftest's — so none can drift from what training does. One call, step(), is one batch:
//
//   targets: matched                         the loss's rows
//   [ranks recording: propose a plan]        the rows' capacity, recording again: all-reduced
//   settings = schedule.at(iteration)        learning rates, momentum, accumulation (YOLOv5's)
//   step scalars: staged, one upload         what changes every step, for the kernels to read
//   counts, rows: uploaded                   the loss's inputs, into the Solver's own buffers
//                                            (after reading the plan: recording_plan.h)
//   boundary = iteration - last step's >= accumulate
//   ---- the step's kernels: from here to the update, the host never waits for the device, and
//        every step of a kind issues the same ops on the same memory (kernels/op_sequence.h);
//        with --cuda-graph, recorded once per kind and replayed (collectives included: NCCL's)
//   reducer.set_sync(boundary)               only an accumulation's last batch communicates
//   comm.allreduce(counts)                   the global batch's counts (several ranks)
//   forward_backward                         forward, YOLOv5's loss, backward (step.h); on
//                                            several ranks the buckets leave during backward
//   comm.allreduce(loss)                     the ranks' shares of the loss summed, on the device
//   at the boundary, update():
//     reducer.finish()                       every gradient averaged over the ranks
//     clip to norm 10                        one reduction and one scale, on the device
//     optimizer step, zero_grad              one pass over the arena each (and, under --amp,
//                                            one rounding of the weights' bf16 copies)
//     EMA update                             one pass
//   ---- end of the step's kernels
//   comm.end_step() at the boundary          the ranks' once-a-step desync check, if any
//   the loss copied out                      into a small ring the caller reads it from
//   after the first step only: the cuDNN algorithms it timed, rank 0's taken by every rank and
//   written to the per-user cache file (engine/algorithm_cache.h; read at construction)
//
// It owns the parameter arena (every parameter and gradient in one flat buffer each), the
// optimizer, the EMA, the schedule, the gradient reducer (on several ranks) and the kernels'
// process-wide switches (TF32, Winograd) and the graph's mixed precision, all set from plain
// options at construction. restore() is the one place a resumed run touches the step's state.
#pragma once

#include <array>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "engine/distributed/ddp/reducer.h"
#include "engine/optim/ema.h"
#include "engine/optim/optimizer.h"
#include "engine/optim/schedule.h"
#include "engine/parameter_arena.h"
#include "models/train/checkpoint.h"
#include "models/train/options.h"
#include "models/train/recording_plan.h"
#include "models/train/step.h"

namespace bareyolo::models {

struct SolverOptions {
  // The update: SGD with Nesterov momentum, Adam or AdamW over YOLOv5's three parameter groups;
  // weight decay on the weights group alone, scaled as YOLOv5 scales it (x batch x
  // accumulate / nbs).
  OptimizerKind optimizer = OptimizerKind::sgd;
  ScheduleHyp schedule = {};  // lr0, lrf, momentum, warm-up, cosine
  double weight_decay = 5e-4;
  double max_grad_norm = 10.0;  // YOLOv5 clips the gradients' global norm at 10
  int freeze = 0;               // model layers 0 .. freeze-1 are not optimised (--freeze)
  // The schedule's frame: `batch` is the global batch (every rank's images of one iteration),
  // nbs the nominal batch an optimizer step gathers by accumulating batches.
  int epochs = 1;
  int64_t batches_per_epoch = 1;
  int batch = 16, nbs = 64;
  LossOptions loss = {};

  // The device switches (process-wide; TrainOptions says what each does).
  bool tf32 = false, winograd = true, amp = false, cudnn_deterministic = true;
  // --cuda-graph (options.h): each kind of step (input shape, whether it updates) recorded as
  // one CUDA graph on its second run and replayed from then on (kernels/step_graph.h), on a GPU.
  // With a communicator whose collectives a graph can hold (NCCL's) they are recorded with the
  // step (the trainer passes auto here only where the run's options allow it: records_cuda_graphs).
  // on: a recording that fails throws; automatic: that kind launches its kernels one by one
  // instead, with a note (take_notes), as it does wherever recording cannot be (the CPU, another
  // communicator); off: never.
  CudaGraphMode cuda_graph = CudaGraphMode::off;
  // The activations and their gradients in channels last (Graph::set_channels_last).
  bool channels_last = false;

  // With a communicator (several ranks): SyncBatchNorm, and the reducer's buckets.
  bool sync_bn = true;
  double bucket_mb = 0;  // 0: sized from the model
  bool bf16_grad_buckets = false;
};

// What step() did with one batch.
struct StepOutcome {
  // The global batch's loss (the ranks' shares summed), a loss tensor on the model's device that
  // the device may still be computing: read_loss reads it, outside the step, before the third
  // step after this one (it is one of three the Solver keeps and reuses in turn).
  Tensor loss;
  bool updated = false;  // the batch ended an accumulation: the weights moved
};

// Which state entries --freeze N freezes: those of model layers 0 .. N-1 (names starting
// "model.<k>."), as YOLOv5 does. Frozen parameters get no optimizer step, no weight decay and
// no part in gradient clipping (and the gradient reducer skips them); the EMA still follows
// them.
std::vector<bool> frozen_entries(const std::vector<StateEntry>& state, int freeze_layers);

class Solver {
 public:
  // `model`'s parameters move into the arena (values kept: load initial weights first). With
  // `comm`, every rank starts from rank 0's parameters, BatchNorm syncs its statistics
  // (options.sync_bn) and the reducer averages the gradients.
  Solver(DetectionModel& model, const SolverOptions& options, dist::Communicator* comm = nullptr);
  ~Solver();
  Solver(const Solver&) = delete;
  Solver& operator=(const Solver&) = delete;

  // One batch of iteration `iteration` (its index in the run: batch + epoch x batches per
  // epoch), as the file comment shows. `matched`: the labels already matched to the input's
  // grids (the loader's Batch::matched), or null for the step to match them (step.h).
  StepOutcome step(const Tensor& images, const std::vector<LabelRow>& labels, int64_t iteration,
                   const data::MatchedTargets* matched = nullptr);
  // The two halves of step() on their own: a batch's forward and backward (gradients add up),
  // returning this rank's share of the loss (a loss tensor), and the update that ends an
  // accumulation.
  Tensor forward_backward(const Tensor& images, const std::vector<LabelRow>& labels,
                          const data::MatchedTargets* matched = nullptr);
  void update();
  // Drops a partial accumulation (YOLOv5 does at each epoch's start): the gradients to zero.
  void drop_accumulation() { optimizer_->zero_grad(); }
  // Destroys the step's CUDA graphs (their memory goes back to the allocator's cache) and
  // forgets every kind of step: the next of a kind runs launched, the one after records. The
  // Solver does so itself where a recording would replay into memory that moved (see step());
  // a caller that wants the memory now (a bench, before another engine's turn) calls it, on
  // every rank alike (ranks agree on their recordings with collectives).
  void drop_recordings();

  // Continues from `resume`: every tensor of the step (weights, EMA, optimizer state) and the
  // counters; a missing tensor is refused, naming `source`, before anything is copied
  // (check_resume_fits refuses another optimizer's checkpoint before this is called).
  void restore(const Resume& resume, const std::string& source);
  SolverState state() const;
  // The tensors a checkpoint holds, under the model's names: the EMA's as model.*, the raw
  // weights as train.model.*, the optimizer's buffers as optimizer.*.
  CheckpointTensors checkpoint_tensors();

  std::vector<Tensor>& ema_values() { return ema_.values(); }
  const SolverOptions& options() const { return options_; }
  ParameterArena& arena() { return arena_; }
  const ParameterArena& arena() const { return arena_; }
  const Schedule& schedule() const { return schedule_; }
  int64_t optimizer_steps() const { return optimizer_->steps(); }  // in the whole run
  // What the Solver has to say since the last call (a kind of step it could not record, where
  // the cuDNN algorithms came from or went).
  std::vector<std::string> take_notes() { return std::exchange(notes_, {}); }
  // On a GPU, rank 0 (or the one process) writes the cuDNN algorithms chosen so far into the
  // per-user cache file (engine/algorithm_cache.h), if any is new since the last save. The
  // Solver does after its first step; the trainer again at the end, for the shapes met later
  // (validation's, --multi-scale's).
  void save_algorithm_choices();

 private:
  DetectionModel& model_;
  const SolverOptions options_;
  dist::Communicator* comm_;
  const std::vector<StateEntry> state_;
  ParameterArena arena_;
  const Schedule schedule_;
  const std::unique_ptr<Optimizer> optimizer_;
  ModelEma ema_;
  std::unique_ptr<dist::Reducer> reducer_;
  const TargetMatcher matcher_;
  LossRows loss_rows_;                 // the loss's matched rows, every step's
  Tensor loss_counts_;                 // the loss's counts (local, then global), every step's
  HeadLoss loss_buffers_;              // where the loss writes, for the last input shape
  std::array<Tensor, 3> kept_losses_;  // the steps' losses, handed out in turn
  size_t next_kept_loss_ = 0;
  using StepKind = std::tuple<int64_t, int64_t, int64_t, int64_t, bool>;  // n, c, h, w, updates
  struct StepGraphs;
  struct HostCounters;
  HostCounters host_counters() const;
  void put_back(const HostCounters& counters);

  // loss_buffers_ for heads of `cells` (kept while the input's shape stays).
  void use_loss_buffers(const std::vector<LevelCells>& cells);
  RecordingPlanVote plan_vote_;  // the rows' capacity and recording again, agreed each step
  void propose_plan(int64_t rows, bool moved);
  // The update without the end of the step (run_step's, which a recording holds).
  void update_weights();
  // The step's kernels, issued one by one (run_step) or replayed from the kind's graph.
  Tensor run_step(const Tensor& images, const LossNormalization& local, bool boundary,
                  HeadLoss* loss_buffers);
  Tensor replay_step(const StepKind& kind, const Tensor& images, bool boundary);
  // Whether `kind` has a graph to replay, recording it when it has none yet.
  bool graphs_ready(const StepKind& kind, const Tensor& images, const LossNormalization& norm,
                    bool boundary);

  int64_t last_step_iteration_ = -1;     // iteration (batch + epoch * batches) of the last step
  std::set<StepKind> step_kinds_seen_;   // the kinds of step run so far, of the current shape
  uint64_t activations_generation_ = 0;  // the model's at the last step (Graph's)
  bool records_ = false;                 // --cuda-graph, where this Solver can
  std::map<StepKind, std::unique_ptr<StepGraphs>> graphs_;  // its recordings, of one input shape
  std::set<StepKind> unrecorded_;                           // kinds whose recording failed
  std::vector<std::string> notes_;

  // cuDNN's algorithm choices (kernels/convolution_choices.h): the GPU's identity ("" on the
  // CPU, which has none), and whether the first step, which chose them, is done.
  const std::string algorithm_identity_;
  bool first_step_done_ = false;
  // Moves of the convolutions' shared workspace and the kernels' GPU scratch, when last seen.
  uint64_t workspace_moves_ = 0;
  void share_algorithm_choices();
  void note_from_rank0(std::string note);
  void note_layout_copies(uint64_t copies);
  bool rank0() const { return !comm_ || comm_->rank() == 0; }
};

}  // namespace bareyolo::models
