// tests/unit/reducer.cpp — the gradient reducer on one process, against a recording stand-in
// for the communicator (the multi-process tests in tests/dist/reducer.cpp reduce for real).
//
// The stand-in plays a two-rank job whose other rank's gradient is always 3x this one's, so
// an averaged bucket must come back as exactly 2x what backward wrote. It also records, per
// all-reduce, how many nodes backward had finished: the proof that buckets go out during
// backward, not in a loop after it. The tags the reducer and SyncBN give their collectives
// (what names them when ranks desynchronise, engine/distributed/comm/collective_fingerprint.h)
// are recorded too.
#include <set>

#include "engine/distributed/ddp/data_parallel.h"
#include "engine/distributed/ddp/reducer.h"
#include "engine/distributed/ddp/sync_batchnorm.h"
#include "engine/parameter_arena.h"
#include "engine/shipped_files.h"
#include "models/yolo/yolo_model.h"
#include "tests/support/testing.h"

using namespace bareyolo;
using namespace bareyolo::dist;
using namespace bareyolo::testing;

namespace {

class CompletedWork final : public Work {
 public:
  void wait() override {}
  bool completed() override { return true; }
};

class TwoRankStandIn final : public Communicator {
 public:
  int nodes_done = 0;
  std::vector<int> launched_after_nodes;  // per allreduce
  std::vector<void*> launched_buffers;
  std::vector<std::string> launched_tags;

  int rank() const override { return 0; }
  int world_size() const override { return 2; }
  Backend backend() const override { return Backend::tcp; }
  WorkHandle allreduce(CommBuffer buffer, ReduceOp op, std::string_view tag) override {
    REQUIRE(op == ReduceOp::avg);
    REQUIRE(buffer.dtype == DType::f64);
    double* values = static_cast<double*>(buffer.data);
    for (int64_t i = 0; i < buffer.count; ++i) values[i] = (values[i] + 3 * values[i]) / 2;
    launched_after_nodes.push_back(nodes_done);
    launched_buffers.push_back(buffer.data);
    launched_tags.emplace_back(tag);
    return std::make_shared<CompletedWork>();
  }
  WorkHandle broadcast(CommBuffer, int, std::string_view) override {
    return std::make_shared<CompletedWork>();
  }
  WorkHandle allgather(CommBuffer, CommBuffer, std::string_view) override {
    throw std::logic_error("unused");
  }
  WorkHandle barrier(std::string_view) override { return std::make_shared<CompletedWork>(); }
};

// A one-rank communicator that records the tag of every collective.
class TagRecorder final : public Communicator {
 public:
  std::vector<std::string> tags;

  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  Backend backend() const override { return Backend::tcp; }
  WorkHandle allreduce(CommBuffer buffer, ReduceOp op, std::string_view tag) override {
    tags.emplace_back(tag);
    return one_rank_->allreduce(buffer, op);
  }
  WorkHandle broadcast(CommBuffer buffer, int root, std::string_view tag) override {
    tags.emplace_back(tag);
    return one_rank_->broadcast(buffer, root);
  }
  WorkHandle allgather(CommBuffer send, CommBuffer recv, std::string_view tag) override {
    tags.emplace_back(tag);
    return one_rank_->allgather(send, recv);
  }
  WorkHandle barrier(std::string_view tag) override {
    tags.emplace_back(tag);
    return one_rank_->barrier();
  }

 private:
  std::unique_ptr<Communicator> one_rank_ = make_single_rank_communicator();
};

models::DetectionModel tiny_model() {
  return models::DetectionModel(models::load_model_config(shipped_file("models/yolov5-tiny.yaml")),
                                {.nc = 2, .seed = 5, .dtype = DType::f64});
}

// Forward + backward of random head gradients; returns each trainable gradient's values.
std::vector<std::vector<double>> run_backward(models::DetectionModel& model, Reducer* reducer,
                                              TwoRankStandIn* comm) {
  Rng rng(17);
  const Tensor images =
      Tensor::from_vector(random_vector<double>(rng, 2 * 3 * 64 * 64, -1, 1), {2, 3, 64, 64});
  std::vector<Tensor> grads;
  for (const Tensor& head : model.forward(images, Mode::train))
    grads.push_back(
        Tensor::from_vector(random_vector<double>(rng, size_t(head.numel()), -1, 1), head.shape()));
  model.backward(grads, [&](int node) {
    if (reducer) reducer->node_done(node);
    if (comm) ++comm->nodes_done;
  });
  if (reducer) reducer->finish();
  std::vector<std::vector<double>> values;
  for (const StateEntry& e : model.state())
    if (e.trainable()) values.push_back(e.grad->to_doubles());
  return values;
}

// The tiny model's arena in small buckets (several of them), reducing over the stand-in.
struct SmallBuckets {
  models::DetectionModel model = tiny_model();
  TwoRankStandIn comm;
  ParameterArena arena{model.state()};
  Reducer reducer{arena, model.graph(), comm, {.bucket_mb = 0.05, .first_bucket_mb = 0.01}};

  // Backward's reports, from the last node down to node `last` (1: node 0's parameters unused).
  void nodes_done_down_to(int last) {
    for (int node = model.graph().size() - 1; node >= last; --node) reducer.node_done(node);
  }
};

}  // namespace

TEST_CASE(
    "reducer: gradients live in the buckets, buckets go out during backward, the mean comes back") {
  models::DetectionModel reference = tiny_model();
  const std::vector<std::vector<double>> plain = run_backward(reference, nullptr, nullptr);

  models::DetectionModel model = tiny_model();
  const std::vector<StateEntry> state = model.state();
  ParameterArena arena(state);
  TwoRankStandIn comm;
  Reducer reducer(arena, model.graph(), comm, {.bucket_mb = 0.05, .first_bucket_mb = 0.01});
  REQUIRE(reducer.bucket_count() >= 3);

  // The buckets are consecutive ranges of the gradient arena covering it, and every gradient's
  // memory lies inside its bucket: no copy, no second buffer.
  const double* arena_begin = arena.gradients().view<double>().data;
  int64_t next = 0;
  for (int b = 0; b < reducer.bucket_count(); ++b) {
    const Tensor& bucket = reducer.bucket_buffer(b);
    const double* begin = bucket.view<double>().data;
    CHECK(begin == arena_begin + next);
    next += bucket.numel();
    for (size_t slot : reducer.bucket_slots(b)) {
      const double* grad = arena.slots()[slot].grad->view<double>().data;
      CHECK(grad >= begin);
      CHECK(grad + arena.slots()[slot].count <= begin + bucket.numel());
    }
  }
  CHECK(next == arena.optimised());
  // Reverse registration order: the last parameter is in bucket 0, the first in the last.
  auto bucket_holding = [&](const std::string& name) {
    for (int b = 0; b < reducer.bucket_count(); ++b)
      for (size_t slot : reducer.bucket_slots(b))
        if (arena.slots()[slot].name == name) return b;
    return -1;
  };
  std::vector<std::string> trainable;
  for (const StateEntry& e : state)
    if (e.trainable()) trainable.push_back(e.name);
  CHECK(bucket_holding(trainable.back()) == 0);
  CHECK(bucket_holding(trainable.front()) == reducer.bucket_count() - 1);

  const std::vector<std::vector<double>> reduced = run_backward(model, &reducer, &comm);
  REQUIRE(comm.launched_after_nodes.size() == size_t(reducer.bucket_count()));
  // Each all-reduce names its bucket: the fingerprint a desynchronised rank is told apart by.
  for (int b = 0; b < reducer.bucket_count(); ++b)
    CHECK(comm.launched_tags[size_t(b)] == "bucket " + std::to_string(b));
  // Overlap is real: the first bucket left while most of backward was still to run.
  CHECK(comm.launched_after_nodes.front() < model.graph().size() / 2);
  CHECK(comm.launched_after_nodes.front() < comm.launched_after_nodes.back());
  REQUIRE(reduced.size() == plain.size());
  for (size_t p = 0; p < plain.size(); ++p)
    for (size_t k = 0; k < plain[p].size(); ++k) REQUIRE(reduced[p][k] == 2 * plain[p][k]);
}

TEST_CASE("reducer: no_sync accumulates locally, a frozen parameter is left alone") {
  models::DetectionModel model = tiny_model();
  TwoRankStandIn comm;
  const std::string frozen = model.state().front().name;  // model.0.conv.weight
  ParameterArena arena(model.state(),
                       {.frozen = [&](const StateEntry& e) { return e.name == frozen; }});
  Reducer reducer(arena, model.graph(), comm);
  reducer.set_sync(false);
  const std::vector<std::vector<double>> once = run_backward(model, &reducer, nullptr);
  CHECK(comm.launched_buffers.empty());
  reducer.set_sync(true);
  const std::vector<std::vector<double>> twice = run_backward(model, &reducer, nullptr);
  CHECK_FALSE(comm.launched_buffers.empty());
  // Frozen (first entry): two local backwards, never averaged; the rest: 2 x (sum of two).
  for (size_t k = 0; k < once[0].size(); ++k) REQUIRE(twice[0][k] == 2 * once[0][k]);
  for (size_t p = 1; p < once.size(); ++p)
    for (size_t k = 0; k < once[p].size(); ++k) REQUIRE(twice[p][k] == 2 * (2 * once[p][k]));
}

TEST_CASE("reducer: a bucket whose parameter got no gradient still completes at finish") {
  SmallBuckets job;
  job.nodes_done_down_to(1);  // node 0 never reported (as if its parameters were unused)
  CHECK(job.reducer.launched_buckets() < job.reducer.bucket_count());
  job.reducer.finish();
  CHECK(job.comm.launched_buffers.size() == size_t(job.reducer.bucket_count()));
}

TEST_CASE("reducer: an abandoned step leaves the next one to start afresh") {
  // A CUDA graph's recording that fails midway leaves its buckets launched into the recording;
  // the eager step run instead must not find its gradients "finalised twice".
  SmallBuckets job;
  job.nodes_done_down_to(1);
  REQUIRE(job.reducer.launched_buckets() > 0);
  job.reducer.abandon_step();
  CHECK(job.reducer.launched_buckets() == 0);
  const size_t launched = job.comm.launched_buffers.size();
  job.nodes_done_down_to(0);
  job.reducer.finish();
  CHECK(job.comm.launched_buffers.size() == launched + size_t(job.reducer.bucket_count()));
}

TEST_CASE("merge_moments equals the moments of the concatenated values") {
  Rng rng(3);
  const std::vector<double> a = random_vector<double>(rng, 7, 1000, 1001);
  const std::vector<double> b = random_vector<double>(rng, 12, 999, 1003);
  auto moments = [](const std::vector<double>& v) {
    double mean = 0, m2 = 0;
    for (double x : v) mean += x / double(v.size());
    for (double x : v) m2 += (x - mean) * (x - mean);
    return ChannelMoments{int64_t(v.size()), {mean}, {m2}};
  };
  std::vector<double> both = a;
  both.insert(both.end(), b.begin(), b.end());
  const ChannelMoments merged = merge_moments(moments(a), moments(b)), direct = moments(both);
  CHECK(merged.count == 19);
  CHECK(merged.mean[0] == doctest::Approx(direct.mean[0]).epsilon(1e-14));
  CHECK(merged.m2[0] == doctest::Approx(direct.m2[0]).epsilon(1e-10));
  CHECK(merge_moments(ChannelMoments{}, moments(a)).m2[0] == moments(a).m2[0]);
}

TEST_CASE("sync_batchnorm: each layer's meetings are tagged with its state name") {
  models::DetectionModel model = tiny_model();
  TagRecorder comm;
  REQUIRE(sync_batchnorm(model.graph(), &comm) > 0);
  model.forward(Tensor::zeros({2, 3, 64, 64}, Device::cpu(), DType::f64), Mode::train);
  REQUIRE_FALSE(comm.tags.empty());
  // The BatchNorms' state names: "model.0.bn.weight" less ".weight".
  std::set<std::string> layers;
  for (const StateEntry& e : model.state())
    if (e.name.ends_with(".bn.weight")) layers.insert(e.name.substr(0, e.name.size() - 7));
  // Every meeting names its layer, or the first of the layers that share it ("... +1", C3's
  // cv1 and cv2).
  for (const std::string& tag : comm.tags) {
    INFO(tag);
    REQUIRE(tag.rfind("SyncBN ", 0) == 0);
    const std::string layer =
        tag.substr(7, tag.find(" +") == std::string::npos ? std::string::npos : tag.find(" +") - 7);
    CHECK(layers.count(layer) == 1);
  }
  CHECK(comm.tags.front() == "SyncBN model.0.bn");  // the first layer's forward meets first
}
