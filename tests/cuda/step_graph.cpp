// tests/cuda/step_graph.cpp — --cuda-graph (kernels/step_graph.h, the Solver's replay_step): the
// tiny model trained by a Solver that records its steps as CUDA graphs and replays them against
// the same model trained by a Solver that launches every kernel, from the same weights on the
// same batches: every state tensor the same bits after every step. The batches carry different
// labels (the loss, inside the graph, reads each batch's rows where the Solver staged them), one of
// them more rows than the rows' buffer held (it moves, and every kind is recorded again), and two
// batches make one optimizer step (nbs = 2 x batch; from iteration 50 of warm-up's 100 on), so
// both kinds of step (one that updates, one that does not) are recorded and replayed, at
// iterations 60-71 of warm-up, where every step has its own learning rates and momentum (which a
// replay must read from the step's scalars, not from its recording); some steps are pure
// replays: one launch each. cuDNN's
// algorithms are the deterministic ones (the default), so eager steps repeat their bits and a
// replay must too. And a warm eager step, in either layout and precision, calls no allocator and
// makes no cuDNN descriptor.
#include <chrono>
#include <cstring>
#include <memory>
#include <vector>

#include "engine/distributed/comm/host_staging.h"
#include "engine/distributed/comm/nccl_communicator.h"
#include "engine/distributed/comm/store.h"
#include "engine/distributed/comm/watched_communicator.h"
#include "engine/shipped_files.h"
#include "kernels/cuda/conv2d_paths.h"
#include "kernels/cuda/runtime/allocator.h"
#include "kernels/cuda/runtime/runtime.h"
#include "kernels/step_graph.h"
#include "models/train/solver.h"
#include "tests/support/testing.h"

using namespace bareyolo;
using namespace bareyolo::models;

namespace {

constexpr int kBatch = 2;

struct Run {
  DetectionModel model;
  Solver solver;
  // With `comm`, the Solver's collectives too (SyncBatchNorm, the reducer's buckets, the loss's
  // counts and items).
  Run(bool cuda_graph, dist::Communicator* comm = nullptr)
      : model(load_model_config(shipped_file("models/yolov5-tiny.yaml")),
              {.nc = 2, .seed = 5, .device = Device::cuda(0)}),
        solver(model,
               {.epochs = 20,
                .batches_per_epoch = 10,
                .batch = kBatch,
                .nbs = 2 * kBatch,
                .loss = {scale_loss_gains({}, 3, 2, 64), 2},
                .cuda_graph = cuda_graph ? CudaGraphMode::on : CudaGraphMode::off},
               comm) {}
};

// Every byte of the run's state: weights, EMA, optimizer buffers, BatchNorm's counters.
std::vector<std::vector<std::byte>> state_bytes(Solver& solver) {
  std::vector<std::vector<std::byte>> bytes;
  const CheckpointTensors tensors = solver.checkpoint_tensors();
  for (const auto* entries : {&tensors.ema, &tensors.model})
    for (const StateEntry& e : *entries) {
      const Tensor host = e.value->to(Device::cpu());
      const auto* data = static_cast<const std::byte*>(host.storage()->data());
      bytes.emplace_back(data, data + host.numel() * dtype_size(host.dtype()));
    }
  for (const auto& [name, tensor] : tensors.optimizer) {
    const Tensor host = tensor->to(Device::cpu());
    const auto* data = static_cast<const std::byte*>(host.storage()->data());
    bytes.emplace_back(data, data + host.numel() * dtype_size(host.dtype()));
  }
  return bytes;
}

// Both runs take the same batches (more labels in some, one past the rows' buffer; of
// size_of(iteration) pixels square) and must keep every state tensor the same bits. Before
// iteration `release_at`, both models give their activations and the cached memory back.
void check_replays_match(
    Run& eager, Run& replayed, int64_t steps = 12,
    int64_t (*size_of)(int64_t iteration) = [](int64_t) -> int64_t { return 64; },
    int64_t release_at = -1) {
  testing::Rng rng(31);
  int pure_replays = 0;  // steps the replaying run issued as one launch
  for (int64_t iteration = 0; iteration < steps; ++iteration) {
    const int64_t size = size_of(iteration);
    const Tensor images =
        Tensor::from_vector(testing::random_vector<float>(rng, kBatch * 3 * size * size, 0, 1),
                            {kBatch, 3, size, size})
            .to(Device::cuda(0));
    std::vector<LabelRow> labels = {{0, 0, 0.3f, 0.4f, 0.2f, 0.3f}};
    for (int64_t extra = 0; extra < iteration % 3; ++extra)  // a different count of rows
      labels.push_back({1, 1, 0.2f + 0.1f * float(extra), 0.5f, 0.3f, 0.2f});
    if (iteration == 6)  // 100 labels: more rows than the buffer's first 256
      for (int k = 0; k < 100; ++k)
        labels.push_back({k % 2, k % 2, 0.1f + 0.008f * float(k), 0.5f, 0.3f, 0.4f});
    if (iteration == release_at) {
      for (Run* run : {&eager, &replayed}) run->model.graph().release_activations();
      cuda::empty_cache(0);
    }
    const StepOutcome a = eager.solver.step(images, labels, 60 + iteration);
    const uint64_t launches_before = cuda::launches();
    const StepOutcome b = replayed.solver.step(images, labels, 60 + iteration);
    pure_replays += cuda::launches() - launches_before == 1;
    INFO("iteration ", iteration);
    CHECK(a.updated == b.updated);
    CHECK(read_loss(a.loss).total == read_loss(b.loss).total);
    CHECK(state_bytes(eager.solver) == state_bytes(replayed.solver));
  }
  CHECK(pure_replays >= 2);
  CHECK(eager.solver.state().optimizer_steps == replayed.solver.state().optimizer_steps);
  CHECK(eager.solver.state().ema_updates == replayed.solver.state().ema_updates);
}

}  // namespace

TEST_CASE("cuda graph: replayed steps train the tiny model to the eager steps' bits") {
  REQUIRE(StepGraph::supported(Device::cuda(0)));
  Run eager(false), replayed(true);
  check_replays_match(eager, replayed);
}

// A step of another input shape reallocates the modules' intermediates: the recordings of the
// shape before must not replay into them (the Solver drops them, and records again). Back at
// 64 px after its recordings (iteration 8), or before any (iteration 4: the first step of a
// shape runs launched again, reallocating, before it is recorded).
TEST_CASE("cuda graph: a change of input shape and back keeps the eager steps' bits") {
  {
    Run eager(false), replayed(true);
    check_replays_match(eager, replayed, 16, [](int64_t iteration) -> int64_t {
      return iteration >= 4 && iteration < 8 ? 96 : 64;
    });
  }
  Run eager(false), replayed(true);
  check_replays_match(eager, replayed, 16, [](int64_t iteration) -> int64_t {
    return iteration >= 2 && iteration < 4 ? 96 : 64;
  });
}

// A model that gave its activations back (as a bench does between its engines' turns) must not
// be replayed into the memory it gave back: the Solver sees Graph::activations_generation move
// and records again.
TEST_CASE("cuda graph: a model's activations given back between steps, replays keep the bits") {
  Run eager(false), replayed(true);
  check_replays_match(
      eager, replayed, 14, [](int64_t) -> int64_t { return 64; }, 8);
}

// --cuda-graph on with an NCCL communicator (world size 1 here: one GPU), wrapped as a training
// job wraps it (host staging, the watched communicator): the collectives of the step
// (SyncBatchNorm's, the buckets', the loss's) are recorded with it and replayed, and the plan
// the ranks agree on before each step (the rows' capacity: the 7th batch outgrows it) is read.
TEST_CASE("nccl graph: replayed steps with their collectives give the launched steps' bits") {
  using namespace std::chrono_literals;
  dist::StoreServer server("127.0.0.1", 0, "nccl-graph");
  dist::Store store("127.0.0.1", server.port(), "nccl-graph", 10s);
  auto job_communicator = [&] {
    return std::make_unique<dist::WatchedCommunicator>(
        dist::with_host_staging(dist::make_nccl_communicator(store, 0, 1, 0, 30s),
                                dist::cuda_device_staging(0)),
        dist::DesyncCheck::per_step);
  };
  const std::unique_ptr<dist::Communicator> launched = job_communicator(),
                                            recorded = job_communicator();
  REQUIRE(recorded->records_in_cuda_graphs());
  Run eager(false, launched.get()), replayed(true, recorded.get());
  check_replays_match(eager, replayed);
}

// What a recording needs of a step, and what its host time gains from: once warm, an eager step
// (cuda_graph off) asks the caching allocator for nothing (kernels' scratch comes from the
// thread's scratch stack, kernels/scratch_stack.h) and makes no cuDNN descriptor, in either
// layout and either precision.
TEST_CASE("cuda step: a warm eager step calls no allocator and makes no cuDNN descriptor") {
  for (bool channels_last : {false, true})
    for (bool amp : {false, true}) {
      INFO("channels last " << channels_last << ", amp " << amp);
      DetectionModel model(load_model_config(shipped_file("models/yolov5-tiny.yaml")),
                           {.nc = 2, .seed = 5, .device = Device::cuda(0)});
      Solver solver(model, {.epochs = 20,
                            .batches_per_epoch = 10,
                            .batch = kBatch,
                            .nbs = 2 * kBatch,
                            .loss = {scale_loss_gains({}, 3, 2, 64), 2},
                            .amp = amp,
                            .cuda_graph = CudaGraphMode::off,
                            .channels_last = channels_last});
      testing::Rng rng(32);
      const Tensor images =
          Tensor::from_vector(testing::random_vector<float>(rng, kBatch * 3 * 64 * 64, 0, 1),
                              {kBatch, 3, 64, 64})
              .to(Device::cuda(0));
      const std::vector<LabelRow> labels = {{0, 0, 0.3f, 0.4f, 0.2f, 0.3f},
                                            {1, 1, 0.6f, 0.5f, 0.4f, 0.2f}};
      for (int64_t iteration = 100; iteration < 103; ++iteration)  // both kinds of step, warm
        solver.step(images, labels, iteration);
      const cuda::MemoryStats before = cuda::memory_stats(0);
      const uint64_t descriptors = cuda::convolution_descriptors_created();
      for (int64_t iteration = 103; iteration < 107; ++iteration)
        solver.step(images, labels, iteration);
      const cuda::MemoryStats after = cuda::memory_stats(0);
      CHECK(after.backing_allocations == before.backing_allocations);
      CHECK(after.cache_hits == before.cache_hits);
      CHECK(cuda::convolution_descriptors_created() == descriptors);
    }
}
