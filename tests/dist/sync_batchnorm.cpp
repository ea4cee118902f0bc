// tests/dist/sync_batchnorm.cpp — SyncBatchNorm over N forked ranks equals plain BatchNorm over
// the concatenated batch, forward and backward, with unequal per-rank batches; and layers that
// share their meetings (BatchNorm2d's *_together, C3's cv1 and cv2) get what their own would.
//
// Every rank builds the whole batch from one seed (so it can compute the single-process
// reference itself), trains its own slice through a synced BatchNorm2d, and compares.
#include <memory>

#include "engine/distributed/ddp/sync_batchnorm.h"
#include "engine/layers/batchnorm2d.h"
#include "tests/support/dist_testing.h"
#include "tests/support/testing.h"

using namespace bareyolo;
using namespace bareyolo::dist;
using namespace bareyolo::dist::testing;

namespace {

constexpr int kChannels = 5, kHeight = 3, kWidth = 4;
constexpr ops::BatchNormParams kBn{.eps = 1e-3, .momentum = 0.03};  // YOLOv5's

void require_close(const std::vector<double>& got, const std::vector<double>& want,
                   const std::string& what) {
  if (got.size() != want.size()) throw std::runtime_error(what + ": sizes differ");
  for (size_t i = 0; i < got.size(); ++i)
    if (std::abs(got[i] - want[i]) > 1e-10 * (1 + std::abs(want[i])))
      throw std::runtime_error(what + "[" + std::to_string(i) + "] = " + std::to_string(got[i]) +
                               ", plain BatchNorm gives " + std::to_string(want[i]));
}

// Sums `a` and `b` over the ranks, in place: gamma's and beta's gradients stay per rank (the
// reducer averages them with the others), so the plain layer's are the ranks' sums.
void sum_over_ranks(Communicator& comm, std::vector<double>& a, std::vector<double>& b) {
  std::vector<double> both(a);
  both.insert(both.end(), b.begin(), b.end());
  Tensor sums = Tensor::from_vector(both, {1, int64_t(both.size()), 1, 1});
  allreduce_channel_sums(comm, sums, "SyncBN");
  both = sums.to_doubles();
  a.assign(both.begin(), both.begin() + int64_t(a.size()));
  b.assign(both.begin() + int64_t(a.size()), both.end());
}

struct BnResult {
  Tensor y, dx;
  std::vector<double> dgamma, dbeta, running_mean, running_var;
};

// Rank r holds images [first, first + mine) of the global batch of `total`; slices differ in
// size.
struct RankSlice {
  int total = 0, first = 0, mine = 0;
};
RankSlice slice_of(int rank, const std::vector<int>& images_per_rank) {
  RankSlice slice;
  for (size_t r = 0; r < images_per_rank.size(); ++r) {
    if (int(r) < rank) slice.first += images_per_rank[r];
    slice.total += images_per_rank[r];
  }
  slice.mine = images_per_rank[size_t(rank)];
  return slice;
}

// The layer's parameter gradients and running statistics into `r`.
void read_state(BatchNorm2d& bn, BnResult& r) {
  std::vector<StateEntry> state;
  bn.collect_state("", state);
  r.dgamma = state[0].grad->to_doubles();
  r.dbeta = state[1].grad->to_doubles();
  r.running_mean = state[2].value->to_doubles();
  r.running_var = state[3].value->to_doubles();
}

BnResult train_step(BatchNorm2d& bn, const Tensor& x, const Tensor& dy) {
  BnResult r;
  r.y = Tensor::zeros(x.shape(), Device::cpu(), DType::f64);
  r.dx = Tensor::zeros(x.shape(), Device::cpu(), DType::f64);
  const Tensor inputs[] = {x};
  bn.forward(inputs, r.y, Mode::train);
  Tensor grads[] = {r.dx};
  bn.backward(inputs, r.y, dy, grads, ops::GradientWrite::add);
  read_state(bn, r);
  return r;
}

void check_sync_batchnorm(int world, std::vector<int> images_per_rank) {
  check_ranks_ok(run_ranks(world, [&](ProcessGroup& group) {
    const auto [total, first, mine] = slice_of(group.rank(), images_per_rank);
    bareyolo::testing::Rng rng(7);
    const Shape4 shape{total, kChannels, kHeight, kWidth};
    // A large offset: a float sum of squares would lose the variance here.
    const Tensor x = Tensor::from_vector(
        bareyolo::testing::random_vector<double>(rng, shape.numel(), 50, 52), shape);
    const Tensor dy = Tensor::from_vector(
        bareyolo::testing::random_vector<double>(rng, shape.numel(), -1, 1), shape);

    BatchNorm2d plain(kChannels, kBn, Device::cpu(), DType::f64);
    const BnResult want = train_step(plain, x, dy);

    BatchNorm2d synced(kChannels, kBn, Device::cpu(), DType::f64);
    synced.set_sync(group.comm.get());
    Tensor my_x = x.images(first, first + mine), my_dy = dy.images(first, first + mine);
    const BnResult got = train_step(synced, my_x.to(Device::cpu()), my_dy.to(Device::cpu()));

    require_close(got.y.to_doubles(), want.y.images(first, first + mine).to_doubles(), "y");
    require_close(got.dx.to_doubles(), want.dx.images(first, first + mine).to_doubles(), "dx");
    require_close(got.running_mean, want.running_mean, "running_mean");
    require_close(got.running_var, want.running_var, "running_var");
    // gamma/beta gradients stay per rank; their sum over ranks is the plain one.
    std::vector<double> dgamma = got.dgamma, dbeta = got.dbeta;
    sum_over_ranks(*group.comm, dgamma, dbeta);
    require_close(dgamma, want.dgamma, "sum of dgamma");
    require_close(dbeta, want.dbeta, "sum of dbeta");
    // Running statistics are the same bits on every rank.
    std::vector<double> stats = got.running_mean;
    stats.insert(stats.end(), got.running_var.begin(), got.running_var.end());
    std::vector<double> gathered(stats.size() * size_t(world));
    group.comm
        ->allgather(CommBuffer::of(stats.data(), int64_t(stats.size())),
                    CommBuffer::of(gathered.data(), int64_t(gathered.size())))
        ->wait();
    for (int r = 0; r < world; ++r)
      for (size_t i = 0; i < stats.size(); ++i)
        if (gathered[size_t(r) * stats.size() + i] != stats[i])
          throw std::runtime_error("running statistics differ between ranks");
  }));
}

// BatchNorm + SiLU's training forward and backward of each layer on its x and dy: the layers
// together (one meeting for all), or each on its own.
std::vector<BnResult> silu_steps(const std::vector<BatchNorm2d*>& layers,
                                 const std::vector<Tensor>& x, const std::vector<Tensor>& dy,
                                 bool together) {
  std::vector<BnResult> results(layers.size());
  std::vector<Tensor> means, m2s;
  std::vector<BatchNorm2d::SiluTrainForward> forward;
  std::vector<BatchNorm2d::SiluBackward> backward;
  for (size_t k = 0; k < layers.size(); ++k) {
    const Shape4 per_channel{1, x[k].shape().c, 1, 1};
    means.push_back(Tensor::empty(per_channel, Device::cpu(), DType::f64));
    m2s.push_back(Tensor::empty(per_channel, Device::cpu(), DType::f64));
    results[k].y = Tensor::zeros(x[k].shape(), Device::cpu(), DType::f64);
    results[k].dx = Tensor::zeros(x[k].shape(), Device::cpu(), DType::f64);
  }
  for (size_t k = 0; k < layers.size(); ++k) {
    ops::batchnorm_moments<double>(x[k].view<double>(), means[k].view<double>().data,
                                   m2s[k].view<double>().data);
    forward.push_back({*layers[k], x[k], means[k], m2s[k], results[k].y});
    backward.push_back({*layers[k], x[k], dy[k], results[k].dx});
  }
  if (together) {
    BatchNorm2d::forward_silu_train_together(forward);
    BatchNorm2d::backward_silu_together(backward);
  } else {
    for (auto& part : forward)
      part.layer.forward_silu_train(part.x, part.mean, part.m2, part.output);
    for (auto& part : backward) part.layer.backward_silu(part.x, part.grad_output, part.grad_input);
  }
  for (size_t k = 0; k < layers.size(); ++k) read_state(*layers[k], results[k]);
  return results;
}

// Two synced layers of 5 and 3 channels on maps of one size, through one shared meeting each
// way, against the same layers meeting on their own (the same bits on 2 ranks; from 3 on, a
// ring may add a sum's ranks in another order) and against unsynced layers on the whole batch.
void check_shared_meetings(int world, std::vector<int> images_per_rank) {
  check_ranks_ok(run_ranks(world, [&](ProcessGroup& group) {
    const auto [total, first, mine] = slice_of(group.rank(), images_per_rank);
    bareyolo::testing::Rng rng(11);
    std::vector<Tensor> whole_x, whole_dy, my_x, my_dy;
    for (int channels : {kChannels, 3}) {
      const Shape4 shape{total, channels, kHeight, kWidth};
      whole_x.push_back(Tensor::from_vector(
          bareyolo::testing::random_vector<double>(rng, shape.numel(), -3, 4), shape));
      whole_dy.push_back(Tensor::from_vector(
          bareyolo::testing::random_vector<double>(rng, shape.numel(), -1, 1), shape));
      my_x.push_back(whole_x.back().images(first, first + mine).to(Device::cpu()));
      my_dy.push_back(whole_dy.back().images(first, first + mine).to(Device::cpu()));
    }
    auto layers = [&](dist::Communicator* comm) {
      std::vector<std::unique_ptr<BatchNorm2d>> made;
      for (int channels : {kChannels, 3}) {
        made.push_back(std::make_unique<BatchNorm2d>(channels, kBn, Device::cpu(), DType::f64));
        made.back()->set_sync(comm);
      }
      return made;
    };
    auto pointers = [](const std::vector<std::unique_ptr<BatchNorm2d>>& made) {
      return std::vector<BatchNorm2d*>{made[0].get(), made[1].get()};
    };
    const auto shared_layers = layers(group.comm.get()), own_layers = layers(group.comm.get()),
               plain_layers = layers(nullptr);
    const std::vector<BnResult> shared = silu_steps(pointers(shared_layers), my_x, my_dy, true);
    const std::vector<BnResult> own = silu_steps(pointers(own_layers), my_x, my_dy, false);
    const std::vector<BnResult> plain =
        silu_steps(pointers(plain_layers), whole_x, whole_dy, false);
    for (size_t k = 0; k < 2; ++k) {
      const std::string layer = "layer " + std::to_string(k) + ": ";
      if (world == 2 &&
          (shared[k].y.to_doubles() != own[k].y.to_doubles() ||
           shared[k].dx.to_doubles() != own[k].dx.to_doubles() ||
           shared[k].running_var != own[k].running_var || shared[k].dgamma != own[k].dgamma))
        throw std::runtime_error(layer + "a shared meeting changed the bits of 2 ranks' results");
      require_close(shared[k].y.to_doubles(), own[k].y.to_doubles(), layer + "y");
      require_close(shared[k].dx.to_doubles(), own[k].dx.to_doubles(), layer + "dx");
      require_close(shared[k].y.to_doubles(), plain[k].y.images(first, first + mine).to_doubles(),
                    layer + "y (whole)");
      require_close(shared[k].dx.to_doubles(), plain[k].dx.images(first, first + mine).to_doubles(),
                    layer + "dx (whole)");
      require_close(shared[k].running_mean, plain[k].running_mean, layer + "running_mean");
      require_close(shared[k].running_var, plain[k].running_var, layer + "running_var");
      std::vector<double> dgamma = shared[k].dgamma, dbeta = shared[k].dbeta;
      sum_over_ranks(*group.comm, dgamma, dbeta);
      require_close(dgamma, plain[k].dgamma, layer + "sum of dgamma");
      require_close(dbeta, plain[k].dbeta, layer + "sum of dbeta");
    }
  }));
}

}  // namespace

TEST_CASE("SyncBatchNorm over 2 ranks equals BatchNorm over the whole batch") {
  check_sync_batchnorm(2, {2, 3});
}

TEST_CASE("SyncBatchNorm over 3 ranks with unequal slices, one of a single image") {
  check_sync_batchnorm(3, {1, 4, 2});
}

TEST_CASE("BatchNorm + SiLU layers sharing one SyncBatchNorm meeting get their own results") {
  check_shared_meetings(2, {2, 3});
  check_shared_meetings(3, {1, 4, 2});
}
