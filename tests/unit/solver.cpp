// tests/unit/solver.cpp — the Solver (models/train/solver.h), the one owner of the optimizer
// step: it moves the weights at the end of each accumulation and only there, its step is
// exactly the sequence it documents (schedule, forward and backward, clip, the optimizer --
// YOLOv5's SGD, Adam or AdamW -- zero, EMA), and
// restore() continues a run bit for bit.
#include "models/train/solver.h"

#include "engine/distributed/comm/communicator.h"
#include "engine/optim/adam.h"
#include "engine/optim/clip.h"
#include "engine/optim/ema.h"
#include "engine/optim/sgd.h"
#include "engine/shipped_files.h"
#include "kernels/settings.h"
#include "kernels/step_guard.h"
#include "tests/support/testing.h"

using namespace bareyolo;
using namespace bareyolo::models;
using namespace bareyolo::testing;

namespace {

constexpr int kBatch = 2;

DetectionModel tiny_model() {
  return DetectionModel(load_model_config(shipped_file("models/yolov5-tiny.yaml")),
                        {.nc = 2, .seed = 5});
}

struct TinyBatch {
  Tensor images;
  std::vector<LabelRow> labels;
};
TinyBatch tiny_batch(uint64_t seed) {
  Rng rng(seed);
  return {Tensor::from_vector(random_vector<float>(rng, kBatch * 3 * 64 * 64, 0, 1),
                              {kBatch, 3, 64, 64}),
          {{0, 0, 0.3f, 0.4f, 0.2f, 0.3f}, {1, 1, 0.6f, 0.5f, 0.4f, 0.2f}}};
}

// Two batches per optimizer step once warm-up is over (nbs = 2 x the batch), 10 batches an
// epoch: warm-up lasts 100 iterations, so iterations from 100 on accumulate.
SolverOptions accumulating_options() {
  return {.epochs = 20,
          .batches_per_epoch = 10,
          .batch = kBatch,
          .nbs = 2 * kBatch,
          .loss = {scale_loss_gains({}, 3, 2, 64), 2}};
}

std::vector<float> values(const Tensor& t) { return t.to_vector<float>(); }

// YOLOv5's optimizers as its smart_optimizer builds them: SGD with Nesterov momentum, Adam with
// the decay in the gradient (torch.optim.Adam), AdamW with it decoupled; beta1 the momentum.
std::unique_ptr<Optimizer> yolov5_optimizer(OptimizerKind kind, ParameterArena& arena, double lr,
                                            double momentum, double weight_decay) {
  if (kind == OptimizerKind::sgd) return std::make_unique<Sgd>(arena, lr, momentum, weight_decay);
  return std::make_unique<Adam>(arena,
                                kind == OptimizerKind::adam ? AdamDecay::l2 : AdamDecay::decoupled,
                                lr, momentum, weight_decay);
}

bool all_zero(const Tensor& t) {
  for (float v : values(t))
    if (v != 0) return false;
  return true;
}

}  // namespace

TEST_CASE("the solver updates at the end of each accumulation, and only there") {
  DetectionModel model = tiny_model();
  Solver solver(model, accumulating_options());
  const TinyBatch batch = tiny_batch(1);
  const std::vector<float> before = values(solver.arena().values());
  for (int64_t iteration = 100; iteration < 106; ++iteration) {
    const StepOutcome step = solver.step(batch.images, batch.labels, iteration);
    CHECK(read_loss(step.loss).total > 0);
    // The first batch ends an accumulation (nothing came before it), then every second one.
    const bool boundary = iteration % 2 == 0;
    CHECK(step.updated == boundary);
    CHECK(solver.optimizer_steps() == (iteration - 100) / 2 + 1);
    // A step leaves the gradients zeroed for the next accumulation; a batch inside one leaves
    // them summed.
    CHECK(all_zero(solver.arena().gradients()) == boundary);
  }
  CHECK(values(solver.arena().values()) != before);
  CHECK(solver.state().optimizer_steps == 3);
  CHECK(solver.state().last_step_iteration == 104);
  CHECK(solver.state().ema_updates == 3);
  CHECK(solver.state().optimizer_updates == 3);
}

TEST_CASE("a solver step is the schedule, forward and backward, clip, optimizer, zero and EMA") {
  for (OptimizerKind kind : {OptimizerKind::sgd, OptimizerKind::adam, OptimizerKind::adamw}) {
    CAPTURE(optimizer_name(kind));
    DetectionModel model = tiny_model(), twin = tiny_model();
    // Loss gains x8: these batches' gradients (a global norm of 3-9 at the usual gains) then
    // pass YOLOv5's clip at 10, so the twin checks where the Solver clips, not only that it does.
    SolverOptions options = accumulating_options();
    options.loss.hyp.box *= 8, options.loss.hyp.obj *= 8, options.loss.hyp.cls *= 8;
    options.optimizer = kind;
    Solver solver(model, options);

    // The same recipe written out on the twin, in the order the Solver documents.
    ParameterArena arena(twin.state());
    const Schedule schedule(options.schedule, options.epochs, options.batches_per_epoch,
                            options.batch, options.nbs);
    const std::unique_ptr<Optimizer> optimizer = yolov5_optimizer(
        kind, arena, options.schedule.lr0, options.schedule.momentum,
        options.weight_decay * options.batch * schedule.accumulate() / options.nbs);
    ModelEma ema(arena, twin.state());
    int64_t last_step = -1, clipped = 0;
    for (int64_t iteration = 0; iteration < 4; ++iteration) {  // warm-up: a step every batch
      const TinyBatch batch = tiny_batch(10 + uint64_t(iteration));
      solver.step(batch.images, batch.labels, iteration);
      const StepSettings settings = schedule.at(iteration);
      apply(settings, *optimizer);
      forward_backward(twin, batch.images, batch.labels, options.loss);
      REQUIRE(iteration - last_step >= settings.accumulate);
      clipped += gradient_norm(arena) > 10.0;
      clip_gradient_norm(arena, 10.0);
      optimizer->step();
      optimizer->zero_grad();
      ema.update();
      last_step = iteration;
    }
    CHECK(clipped >= 2);                                               // the clip took part
    CHECK(values(solver.arena().values()) == values(arena.values()));  // bit for bit
    for (size_t i = 0; i < ema.values().size(); ++i)
      CHECK(solver.ema_values()[i].to_doubles() == ema.values()[i].to_doubles());
  }
}

TEST_CASE("a step's loss tensor keeps its values until the third step after it") {
  DetectionModel model = tiny_model();
  Solver solver(model, accumulating_options());
  std::vector<Tensor> losses;
  std::vector<double> read_at_once;
  for (int64_t iteration = 0; iteration < 3; ++iteration) {
    const TinyBatch batch = tiny_batch(20 + uint64_t(iteration));
    const StepOutcome step = solver.step(batch.images, batch.labels, iteration);
    losses.push_back(step.loss);
    read_at_once.push_back(read_loss(step.loss).total);
  }
  CHECK(read_at_once[0] != read_at_once[1]);
  CHECK(read_at_once[1] != read_at_once[2]);
  for (size_t i = 0; i < losses.size(); ++i) CHECK(read_loss(losses[i]).total == read_at_once[i]);
}

TEST_CASE("a restored solver continues bit for bit") {
  const SolverOptions options = accumulating_options();
  DetectionModel whole_model = tiny_model(), first_model = tiny_model(), rest_model = tiny_model();
  Solver whole(whole_model, options), first(first_model, options), rest(rest_model, options);
  auto run = [](Solver& solver, int64_t from, int64_t to) {
    for (int64_t iteration = from; iteration < to; ++iteration) {
      const TinyBatch batch = tiny_batch(20 + uint64_t(iteration));
      solver.step(batch.images, batch.labels, iteration);
    }
  };
  run(whole, 99, 106);
  run(first, 99, 102);  // ends with an optimizer step, where the trainer writes checkpoints

  // first's checkpoint restored into a fresh solver (the tensors and the counters), which then
  // takes the batches `whole` took after that step.
  Resume resume;
  resume.info.solver = first.state();
  resume.file = make_checkpoint(first.checkpoint_tensors(), resume.info);
  rest.restore(resume, "first's checkpoint");
  CHECK(rest.state().optimizer_steps == 2);
  CHECK(rest.state().last_step_iteration == 101);
  run(rest, 102, 106);
  CHECK(values(rest.arena().values()) == values(whole.arena().values()));
  for (size_t i = 0; i < whole.ema_values().size(); ++i)
    CHECK(rest.ema_values()[i].to_doubles() == whole.ema_values()[i].to_doubles());
  CHECK(rest.state().optimizer_steps == whole.state().optimizer_steps);
}

// ---- the step guard (kernels/step_guard.h) around Solver::step ---------------------------

namespace {

// A one-rank communicator that, once armed, does inside its all-reduce what a step must not:
// reads a tensor's values on the host, or allocates memory the cache has never held. The
// Solver's reducer calls it inside the step.
class PlantedCommunicator final : public dist::Communicator {
 public:
  enum class Plant { nothing, host_read, allocation } plant = Plant::nothing;
  int planted_line = 0;

  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  dist::Backend backend() const override { return dist::Backend::tcp; }
  dist::WorkHandle allreduce(dist::CommBuffer buffer, dist::ReduceOp op,
                             std::string_view) override {
    if (plant == Plant::host_read) {
      planted_line = __LINE__ + 1;
      (void)Tensor::zeros({1, 1, 1, 4}).to_vector<float>();
    } else if (plant == Plant::allocation) {
      planted_line = __LINE__ + 1;
      (void)Tensor::empty({1, 1, 1, 3'456'791});  // a size no step has asked for
    }
    return one_rank_->allreduce(buffer, op);
  }
  dist::WorkHandle broadcast(dist::CommBuffer buffer, int root, std::string_view) override {
    return one_rank_->broadcast(buffer, root);
  }
  dist::WorkHandle allgather(dist::CommBuffer send, dist::CommBuffer recv,
                             std::string_view) override {
    return one_rank_->allgather(send, recv);
  }
  dist::WorkHandle barrier(std::string_view) override { return one_rank_->barrier(); }

 private:
  std::unique_ptr<dist::Communicator> one_rank_ = dist::make_single_rank_communicator();
};

struct GuardEvents {
  uint64_t reads = step_guard::count(step_guard::Event::host_read);
  uint64_t waits = step_guard::count(step_guard::Event::host_wait);
  uint64_t allocations = step_guard::count(step_guard::Event::system_allocation);
  bool operator==(const GuardEvents&) const = default;
};

}  // namespace

TEST_CASE("step guard passes a training step and an accumulation step on the CPU") {
  REQUIRE(step_guard::enforcing());  // any event would throw out of solver.step
  DetectionModel model = tiny_model();
  Solver solver(model, accumulating_options());
  const TinyBatch batch = tiny_batch(40);
  // Every second batch updates here (the accumulation is already 2 late in the warm-up): each
  // kind of step, updating or accumulating, runs cold once, then warm.
  for (int64_t iteration = 98; iteration < 102; ++iteration)
    solver.step(batch.images, batch.labels, iteration);
  const GuardEvents before;
  for (int64_t iteration = 102; iteration < 106; ++iteration)
    solver.step(batch.images, batch.labels, iteration);
  CHECK(GuardEvents() == before);
  CHECK(solver.state().optimizer_steps == 4);  // after iterations 98, 100, 102 and 104
}

TEST_CASE("step guard fails a solver step on a planted host read or allocation") {
  step_guard::set_enforcing_allocations(true);
  SolverOptions options = accumulating_options();
  options.sync_bn = false;  // the planted all-reduce is the reducer's
  const TinyBatch batch = tiny_batch(41);
  // A fresh solver per plant (a refused step is left half done): one cold step, one clean
  // warm step, then the planted one (warm-up: every step updates, so all three are one kind).
  auto planted_step_error = [&](PlantedCommunicator::Plant plant) {
    DetectionModel model = tiny_model();
    PlantedCommunicator comm;
    Solver solver(model, options, &comm);
    solver.step(batch.images, batch.labels, 0);
    solver.step(batch.images, batch.labels, 1);
    comm.plant = plant;
    try {
      solver.step(batch.images, batch.labels, 2);
    } catch (const step_guard::StepGuardViolation& error) {
      const std::string site = "tests/unit/solver.cpp:" + std::to_string(comm.planted_line);
      CHECK(std::string(error.what()).find(site) != std::string::npos);
      return std::string(error.what());
    }
    return std::string("no error");
  };
  CHECK(planted_step_error(PlantedCommunicator::Plant::host_read)
            .find("a host read of a tensor's values") != std::string::npos);
  CHECK(planted_step_error(PlantedCommunicator::Plant::allocation)
            .find("an allocation from the system allocator") != std::string::npos);
  step_guard::set_enforcing_allocations(false);
}

TEST_CASE("the solver sets the kernels' switches from its options: TF32 and --cudnn") {
  for (const bool fast : {true, false}) {
    CAPTURE(fast);
    DetectionModel model = tiny_model();
    SolverOptions options = accumulating_options();
    options.tf32 = fast;
    options.cudnn_deterministic = !fast;
    const Solver solver(model, options);
    CHECK(ops::gpu_tf32() == fast);
    CHECK(ops::gpu_cudnn_deterministic() == !fast);
  }
}
