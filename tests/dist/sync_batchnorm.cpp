// tests/dist/sync_batchnorm.cpp — SyncBatchNorm over N forked ranks equals plain BatchNorm over
// the concatenated batch, forward and backward, with unequal per-rank batches.
//
// Every rank builds the whole batch from one seed (so it can compute the single-process
// reference itself), trains its own slice through a synced BatchNorm2d, and compares.
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

struct BnResult {
  Tensor y, dx;
  std::vector<double> dgamma, dbeta, running_mean, running_var;
};

BnResult train_step(BatchNorm2d& bn, const Tensor& x, const Tensor& dy) {
  BnResult r;
  r.y = Tensor::zeros(x.shape(), Device::cpu(), DType::f64);
  r.dx = Tensor::zeros(x.shape(), Device::cpu(), DType::f64);
  const Tensor inputs[] = {x};
  bn.forward(inputs, r.y, Mode::train);
  Tensor grads[] = {r.dx};
  bn.backward(inputs, r.y, dy, grads);
  std::vector<StateEntry> state;
  bn.collect_state("", state);
  r.dgamma = state[0].grad->to_doubles();
  r.dbeta = state[1].grad->to_doubles();
  r.running_mean = state[2].value->to_doubles();
  r.running_var = state[3].value->to_doubles();
  return r;
}

// Rank r holds images [first(r), first(r + 1)) of the global batch; slices differ in size.
void check_sync_batchnorm(int world, std::vector<int> images_per_rank) {
  check_ranks_ok(run_ranks(world, [&](ProcessGroup& group) {
    const int rank = group.rank();
    int total = 0, first = 0;
    for (int r = 0; r < world; ++r) {
      if (r < rank) first += images_per_rank[size_t(r)];
      total += images_per_rank[size_t(r)];
    }
    const int mine = images_per_rank[size_t(rank)];
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
    allreduce_channel_sums(*group.comm, dgamma, dbeta);
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

}  // namespace

TEST_CASE("SyncBatchNorm over 2 ranks equals BatchNorm over the whole batch") {
  check_sync_batchnorm(2, {2, 3});
}

TEST_CASE("SyncBatchNorm over 3 ranks with unequal slices, one of a single image") {
  check_sync_batchnorm(3, {1, 4, 2});
}
