// models/train/solver.cpp — see solver.h.
#include "models/train/solver.h"

#include <algorithm>
#include <set>
#include <stdexcept>

#include "engine/algorithm_cache.h"                // defines: load_algorithm_cache
#include "engine/backward_scratch.h"               // defines: backward_scratch_slots
#include "engine/distributed/ddp/data_parallel.h"  // defines: start_data_parallel
#include "engine/optim/adam.h"                     // defines: Adam (and AdamW)
#include "engine/optim/clip.h"                     // defines: clip_gradient_norm
#include "engine/optim/sgd.h"                      // defines: Sgd
#include "engine/trace.h"                          // defines: trace::Range
#include "kernels/nchw_adapter.h"                  // defines: nchw_copies_made
#include "kernels/op_sequence.h"                   // defines: op_sequence::note
#include "kernels/route.h"                         // defines: ops::require_kernel
#include "kernels/scratch_stack.h"                 // defines: ScratchFrame::gpu_moves
#include "kernels/settings.h"                      // defines: ops::use_settings
#include "kernels/step_graph.h"                    // defines: StepGraph
#include "kernels/step_guard.h"                    // defines: step_guard::Scope

namespace bareyolo::models {

namespace {

// Every parameter and gradient in one flat buffer each, the --freeze layers outside the
// optimised range.
ParameterArena make_arena(const std::vector<StateEntry>& state, int freeze) {
  const std::vector<bool> frozen = frozen_entries(state, freeze);
  std::set<const Tensor*> frozen_values;
  for (size_t i = 0; i < state.size(); ++i)
    if (frozen[i]) frozen_values.insert(state[i].value);
  if (std::none_of(state.begin(), state.end(), [&](const StateEntry& e) {
        return e.trainable() && frozen_values.count(e.value) == 0;
      }))
    throw std::invalid_argument("--freeze " + std::to_string(freeze) +
                                " freezes every parameter; freeze fewer layers");
  return ParameterArena(state, {.frozen = [frozen_values](const StateEntry& e) {
                          return frozen_values.count(e.value) > 0;
                        }});
}

// The optimizer `options` names over YOLOv5's three groups, its weight decay scaled by batch x
// accumulate / nbs as YOLOv5 scales it.
std::unique_ptr<Optimizer> make_optimizer(const SolverOptions& options, const Schedule& schedule,
                                          ParameterArena& arena) {
  const double lr0 = options.schedule.lr0, momentum = options.schedule.momentum;
  const double weight_decay =
      options.weight_decay * options.batch * schedule.accumulate() / options.nbs;
  if (options.optimizer == OptimizerKind::sgd)
    return std::make_unique<Sgd>(arena, lr0, momentum, weight_decay);
  const AdamDecay decay =
      options.optimizer == OptimizerKind::adam ? AdamDecay::l2 : AdamDecay::decoupled;
  return std::make_unique<Adam>(arena, decay, lr0, momentum, weight_decay);
}

// A BatchNorm's num_batches_tracked: a host integer that a forward in training mode counts its
// batch in.
bool is_batch_counter(const StateEntry& e) {
  static const std::string kCounter = "num_batches_tracked";
  return e.value->dtype() == DType::i64 && e.name.size() >= kCounter.size() &&
         e.name.compare(e.name.size() - kCounter.size(), kCounter.size(), kCounter) == 0;
}

// A replayed forward runs no host code: its batch is counted here.
void count_batchnorm_batches(const std::vector<StateEntry>& state) {
  for (const StateEntry& e : state)
    if (is_batch_counter(e)) e.value->view<int64_t>().data[0] += 1;
}

// The model's state entries re-pointed at `values` (the EMA's tensors, same order).
std::vector<StateEntry> with_values(std::vector<StateEntry> entries, std::vector<Tensor>& values) {
  for (size_t i = 0; i < entries.size(); ++i) {
    entries[i].value = &values[i];
    entries[i].grad = nullptr;
  }
  return entries;
}

}  // namespace

std::vector<bool> frozen_entries(const std::vector<StateEntry>& state, int freeze_layers) {
  std::vector<bool> frozen(state.size(), false);
  for (size_t i = 0; i < state.size(); ++i)
    for (int k = 0; k < freeze_layers && !frozen[i]; ++k)
      frozen[i] = state[i].name.rfind("model." + std::to_string(k) + ".", 0) == 0;
  return frozen;
}

Solver::Solver(DetectionModel& model, const SolverOptions& options, dist::Communicator* comm)
    : model_(model),
      options_(options),
      comm_(comm),
      state_(model.state()),
      arena_(make_arena(state_, options.freeze)),
      schedule_(options.schedule, options.epochs, options.batches_per_epoch, options.batch,
                options.nbs),
      optimizer_(make_optimizer(options, schedule_, arena_)),
      ema_(arena_, state_),
      matcher_(model, options.loss),
      loss_rows_(arena_.device()),
      loss_counts_(Tensor::zeros({1, 1, 1, model.num_levels() + 1}, arena_.device(), DType::f64)),
      algorithm_identity_(ops::convolution_choices_identity(arena_.device())) {
  for (Tensor& kept : kept_losses_)
    kept = Tensor::zeros({1, 1, 1, kLossItems}, arena_.device(), DType::f64);
  ops::use_settings({.tf32 = options.tf32,
                     .winograd = options.winograd,
                     .cudnn_deterministic = options.cudnn_deterministic});
  model_.graph().set_mixed_precision(options.amp);
  model_.graph().set_channels_last(options.channels_last);
  ops::require_kernel(optimizer_->kernel(), arena_.device(),
                      std::string("--optimizer ") + optimizer_name(options.optimizer));
  // With a communicator only where its collectives go into the recording (NCCL's); whether auto
  // records such a step is the run's to say (records_cuda_graphs, options.h).
  records_ = options.cuda_graph != CudaGraphMode::off && StepGraph::supported(arena_.device()) &&
             (!comm_ || comm_->records_in_cuda_graphs());
  if (options.cuda_graph == CudaGraphMode::on && !StepGraph::supported(arena_.device()))
    throw std::invalid_argument(
        "--cuda-graph on records the step as a CUDA graph; this run "
        "trains on " +
        arena_.device().str() + ", which has none: --cuda-graph off");
  if (options.cuda_graph == CudaGraphMode::on && comm_ && !comm_->records_in_cuda_graphs())
    throw std::invalid_argument(
        "--cuda-graph on records the step with its collectives, which only NCCL's can be (and "
        "not under BAREYOLO_DESYNC_CHECK=1); this process's communicator (world size " +
        std::to_string(comm_->world_size()) + ") cannot: --cuda-graph off (or auto)");
  if (comm_)
    reducer_ = dist::start_data_parallel(*comm_, arena_, state_, model_.graph(),
                                         {.sync_batchnorm = options.sync_bn,
                                          .bucket_mb = options.bucket_mb,
                                          .bf16_buckets = options.bf16_grad_buckets});
  // Mixed precision: the convolutions' bf16 weights rounded once per optimizer step (update),
  // from rank 0's weights on every rank; KRSC in a channels-last graph (what its convolutions
  // read).
  if (options.amp)
    arena_.keep_bf16_copies(options.channels_last ? Layout::channels_last : Layout::nchw);
  // A GPU's convolutions run the algorithms the cache file remembers, rank 0's on every rank.
  if (!algorithm_identity_.empty()) {
    note_from_rank0(load_algorithm_cache(arena_.device()));
    if (comm_) dist::broadcast_convolution_choices(*comm_, arena_.device());
  }
}

Solver::~Solver() = default;

StepOutcome Solver::step(const Tensor& images, const std::vector<LabelRow>& labels,
                         int64_t iteration, const data::MatchedTargets* matched) {
  // The loss's inputs first: the labels matched to the input's grids (the loader's matching,
  // when it did). With ranks recording their steps, each proposes at once what the rows and its
  // moves need of the recordings (recording_plan.h), and the host's work below runs while the
  // ranks agree.
  const Shape4 shape = images.shape();
  const uint64_t nchw_copies = detail::nchw_copies_made.load();
  LevelTargets targets = matcher_.targets_of(shape, labels, matched);
  const std::vector<LevelCells> cells = matcher_.cells_of(shape);
  const uint64_t moves =
      ops::convolution_workspace_moves(arena_.device()) + detail::ScratchFrame::gpu_moves();
  propose_plan(LossRows::rows_of(targets), moves != workspace_moves_);
  workspace_moves_ = moves;
  const StepSettings settings = schedule_.at(iteration);
  apply(settings, *optimizer_);
  // The numbers of this step's update that change from step to step go up in one copy, before
  // the step's kernels are issued: they read them on the device (engine/step_scalars.h).
  optimizer_->stage_settings();
  ema_.stage_decay();
  arena_.step_scalars().upload();
  // The loss's counts and rows, uploaded into the Solver's buffers. A batch with more rows than
  // the rows' buffer holds moves it: every kind of step then starts afresh (its recordings read
  // the old buffer). So does a move of the convolutions' shared workspace or of the kernels'
  // GPU scratch (kernels/scratch_stack.h), which a new shape's first step may make.
  const LossNormalization local = local_normalization(targets, int(shape.n), loss_counts_);
  const PackedRows packed(targets, cells);
  const RecordingPlan plan = plan_vote_.agreed();
  if (loss_rows_.stage(std::move(targets), cells, packed, plan.rows_capacity)) drop_recordings();
  if (plan.record_again) graphs_.clear();
  // The modules keep their intermediates for the last input shape they ran (ensure_tensor): a
  // step of another shape reallocates them, and a recording of the old shape would replay into
  // memory given back. So do a model that gave its memory back and one that changed its
  // precision or layout (Graph::activations_generation). Then every kind starts afresh: the
  // recordings are dropped and the kinds forgotten (they are all of one shape, the last step's),
  // so a step reallocates, launched, before its kind is recorded again (a training run's shape
  // never changes: --rect and --multi-scale record nothing).
  const bool shape_changed = std::ranges::any_of(step_kinds_seen_, [&](const StepKind& kind) {
    const auto& [n, c, h, w, updates] = kind;
    return !(Shape4{n, c, h, w} == shape);
  });
  const uint64_t generation = model_.graph().activations_generation();
  if (shape_changed || generation != activations_generation_) drop_recordings();
  activations_generation_ = generation;
  use_loss_buffers(cells);
  const bool boundary = iteration - last_step_iteration_ >= settings.accumulate;
  // From here to the update the host must never wait for the device (kernels/step_guard.h). A
  // kind of step (its input shape, whether it updates) allocates on its first run only; with
  // --cuda-graph its second run records it and the later ones replay it.
  const StepKind kind{shape.n, shape.c, shape.h, shape.w, boundary};
  const bool warm = !step_kinds_seen_.insert(kind).second;
  // A recording's memory comes from the allocator's first calls for its graph.
  const bool first_replay = records_ && warm && graphs_.count(kind) == 0;
  // Recording runs the step's host code without issuing anything to the device, so it comes
  // before the step proper (with ranks, their outcomes are compared: graphs_ready).
  const bool replays = records_ && warm && graphs_ready(kind, images, local, boundary);
  Tensor loss;
  {
    const step_guard::Scope guarded(warm && !first_replay);
    op_sequence::note("step begins");
    loss = replays ? replay_step(kind, images, boundary)
                   : run_step(images, local, boundary, &loss_buffers_);
    op_sequence::note("step ends");
  }
  if (boundary) last_step_iteration_ = iteration;
  // Every rank ends its optimizer step here alike, launched or replayed (outside any recording:
  // its all-gather carries this step's count): where a backend cannot check that the ranks
  // issued the same collectives, the watched communicator does, once a step.
  if (boundary && comm_) comm_->end_step();
  // Handed out from the Solver's own tensors, so that no tensor of one step is still held when
  // the next one allocates (its memory, and so a CUDA graph of it, stays the same).
  Tensor& kept = kept_losses_[next_kept_loss_++ % kept_losses_.size()];
  kept.copy_from(loss);
  if (!first_step_done_) {
    first_step_done_ = true;
    share_algorithm_choices();
    note_layout_copies(detail::nchw_copies_made.load() - nchw_copies);
  }
  return {.loss = kept, .updated = boundary};
}

void Solver::drop_recordings() {
  graphs_.clear();
  step_kinds_seen_.clear();
}

// The first step timed the algorithms of every convolution it met (kernels/cuda/cudnn_conv.cpp),
// each rank on its own: from the next step on, every rank runs rank 0's, and the file keeps
// them for later runs.
void Solver::share_algorithm_choices() {
  if (algorithm_identity_.empty()) return;
  if (comm_) dist::broadcast_convolution_choices(*comm_, arena_.device());
  save_algorithm_choices();
}

void Solver::save_algorithm_choices() {
  // Rank 0 owns the file, as it owns every side effect of a job.
  if (!algorithm_identity_.empty() && rank0())
    note_from_rank0(save_algorithm_cache(arena_.device()));
}

// On a GPU every op of a channels-last step has a kernel that takes the layout
// (kernels/route.h): a first step that still copied views for some op says so, for it costs time
// (the CPU's kernels read NCHW copies by design: not noted).
void Solver::note_layout_copies(uint64_t copies) {
  if (copies == 0 || !options_.channels_last || in_host_memory(arena_.device())) return;
  note_from_rank0("--channels-last: the first step copied " + std::to_string(copies) +
                  " views for ops without a channels-last kernel on " + arena_.device().str() +
                  " (kernels/nchw_adapter.h)");
}

void Solver::note_from_rank0(std::string note) {
  if (!note.empty() && rank0()) notes_.push_back(std::move(note));
}

// The rows' capacity this rank needs (the buffer's as long as the rows fit) and whether a move
// makes it record again; voted on with the other ranks where they record their collectives.
void Solver::propose_plan(int64_t rows, bool moved) {
  const int64_t held = loss_rows_.capacity();
  plan_vote_.propose(
      records_ ? comm_ : nullptr,
      {.rows_capacity = rows <= held ? held : LossRows::capacity_for(rows), .record_again = moved});
}

void Solver::use_loss_buffers(const std::vector<LevelCells>& cells) {
  std::vector<Shape4> head;
  for (const LevelCells& level : cells) head.push_back(level.head_shape());
  const bool same = loss_buffers_.gradients.size() == head.size() &&
                    std::equal(head.begin(), head.end(), loss_buffers_.gradients.begin(),
                               [](const Shape4& s, const Tensor& t) { return s == t.shape(); });
  if (!same) loss_buffers_ = head_loss_buffers(head, arena_.device(), arena_.dtype());
}

Tensor Solver::run_step(const Tensor& images, const LossNormalization& local, bool boundary,
                        HeadLoss* loss_buffers) {
  if (reducer_) reducer_->set_sync(boundary);
  const trace::Label counts("loss counts");  // names global_normalization's all-reduce
  const LossNormalization norm = comm_ ? global_normalization(*comm_, local) : local;
  Tensor loss = models::forward_backward(model_, images, loss_rows_, norm, options_.loss,
                                         loss_buffers, {comm_, reducer_.get()});
  if (comm_) {  // where the loss is (a GPU's: by NCCL, in order with the gradient buckets)
    const trace::Label label("loss items");
    comm_->allreduce(dist::CommBuffer::of(loss), dist::ReduceOp::sum, "loss items")->wait();
  }
  if (boundary) update_weights();
  return loss;
}

// --cuda-graph records a kind of step as one graph: forward, loss, backward and, when the kind
// updates, the update. A graph reads and writes the addresses it was recorded with, so the batch
// is copied into the kind's input buffer; the loss reads the rows and counts the Solver staged
// in its own buffers (which stay where they are while the rows fit) and writes into the loss
// buffers the kind keeps. What the model held while recording (its plan's activations and
// gradients, the backward's scratch) is held here too: the model may move on to other buffers
// (another input size), and no other tensor may take memory a replay writes.
struct Solver::StepGraphs {
  Tensor input;
  HeadLoss loss;
  std::vector<Tensor> model_buffers;
  std::unique_ptr<StepGraph> step;
  dist::RecordedCollectives collectives;  // with a communicator, the ones the graph holds
};

// The host's counters a step moves: the optimizer's and the EMA's, every BatchNorm's batches.
struct Solver::HostCounters {
  int64_t optimizer_steps, ema_updates;
  std::vector<int64_t> batchnorm_batches;
};

Solver::HostCounters Solver::host_counters() const {
  HostCounters counters{optimizer_->steps(), ema_.updates(), {}};
  for (const StateEntry& e : state_)
    if (is_batch_counter(e)) counters.batchnorm_batches.push_back(e.value->view<int64_t>().data[0]);
  return counters;
}

void Solver::put_back(const HostCounters& counters) {
  optimizer_->set_steps(counters.optimizer_steps);
  ema_.set_updates(counters.ema_updates);
  size_t next = 0;
  for (const StateEntry& e : state_)
    if (is_batch_counter(e)) e.value->view<int64_t>().data[0] = counters.batchnorm_batches[next++];
}

// Recording issues nothing to the device; it runs the host code, whose counters are then put
// back: every step of the kind, from this one on, replays the same way (replay_step). With ranks
// the recordings' outcomes are all-reduced (a recording that fails on one rank fails on all:
// NCCL's recorded collectives are replayed by every rank or by none), the host reading it: a
// wait once per kind, outside the step.
bool Solver::graphs_ready(const StepKind& kind, const Tensor& images, const LossNormalization& norm,
                          bool boundary) {
  if (graphs_.count(kind)) return true;
  if (unrecorded_.count(kind)) return false;
  auto graphs = std::make_unique<StepGraphs>();
  StepGraphs& g = *graphs;
  g.input = Tensor::empty(images.shape(), images.device(), images.dtype());
  g.loss = loss_buffers_;
  const HostCounters before = host_counters();
  std::string failure;  // this rank's recording's, if it failed
  bool recording_collectives = comm_ != nullptr;
  if (recording_collectives) comm_->begin_recording();
  try {
    // The step as run_step issues it, its collectives too (with an NCCL communicator).
    g.step = std::make_unique<StepGraph>(arena_.device(),
                                         [&] { run_step(g.input, norm, boundary, &g.loss); });
    if (comm_) g.collectives = comm_->end_recording();
    recording_collectives = false;
    g.model_buffers = model_.graph().planned_buffers();
    for (Tensor& slot : backward_scratch_slots()) g.model_buffers.push_back(std::move(slot));
  } catch (const std::exception& error) {
    if (recording_collectives) comm_->end_recording();
    if (reducer_) reducer_->abandon_step();  // the eager step that follows starts afresh
    failure = error.what();
  }
  put_back(before);
  if (comm_) {
    int64_t failed = failure.empty() ? 0 : 1;
    comm_->allreduce(dist::CommBuffer::of(&failed, 1), dist::ReduceOp::max, "recording outcome")
        ->wait();
    if (failed != 0 && failure.empty())
      failure = "another rank's recording of this step failed (its log says why)";
  }
  if (!failure.empty()) {
    if (options_.cuda_graph == CudaGraphMode::on) throw std::runtime_error(failure);
    unrecorded_.insert(kind);
    notes_.push_back("--cuda-graph auto: steps of input " + images.shape().str() +
                     " launch their kernels one by one: " + failure);
    return false;
  }
  graphs_[kind] = std::move(graphs);
  return true;
}

// A replay runs no host code, so the Solver does the host's part of the step itself: the
// forward's batch counts, the update's counts.
Tensor Solver::replay_step(const StepKind& kind, const Tensor& images, bool boundary) {
  const trace::Range traced(trace::Track::compute, "step graph");
  StepGraphs& g = *graphs_.at(kind);
  const int64_t uploads = arena_.step_scalars().uploads();
  g.input.copy_from(images);
  count_batchnorm_batches(state_);
  if (boundary) {
    optimizer_->advance();
    ema_.advance();
  }
  if (comm_)
    comm_->replay(g.collectives, "the step graph of input " + images.shape().str(),
                  [&] { g.step->replay(); });
  else
    g.step->replay();
  if (arena_.step_scalars().uploads() != uploads)
    throw std::logic_error("Solver: the step scalars changed inside a replayed step");
  return g.loss.loss;
}

Tensor Solver::forward_backward(const Tensor& images, const std::vector<LabelRow>& labels,
                                const data::MatchedTargets* matched) {
  return models::forward_backward(model_, images, labels, options_.loss, {comm_, reducer_.get()},
                                  matched);
}

void Solver::update() {
  update_weights();
  if (comm_) comm_->end_step();
}

void Solver::update_weights() {
  const trace::Range traced(trace::Track::compute, "optimizer step");
  if (reducer_) reducer_->finish();
  clip_gradient_norm(arena_, options_.max_grad_norm);
  optimizer_->step();
  arena_.refresh_bf16_copies();
  optimizer_->zero_grad();
  ema_.update();
}

void Solver::restore(const Resume& resume, const std::string& source) {
  restore_checkpoint(resume.file, checkpoint_tensors(), source);
  arena_.refresh_bf16_copies();
  const SolverState& saved = resume.info.solver;
  optimizer_->set_steps(saved.optimizer_updates);
  ema_.set_updates(saved.ema_updates);
  last_step_iteration_ = saved.last_step_iteration;
}

SolverState Solver::state() const {
  return {.optimizer_steps = optimizer_->steps(),
          .last_step_iteration = last_step_iteration_,
          .ema_updates = ema_.updates(),
          .optimizer = optimizer_name(options_.optimizer),
          .optimizer_updates = optimizer_->steps()};
}

CheckpointTensors Solver::checkpoint_tensors() {
  return {with_values(state_, ema_.values()), state_, optimizer_->state()};
}

}  // namespace bareyolo::models
