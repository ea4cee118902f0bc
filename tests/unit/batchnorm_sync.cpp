// tests/unit/batchnorm_sync.cpp — SyncBatchNorm's steps between its collectives (kernels/ops.h)
// on the CPU: the merge of the ranks' records bit for bit against dist::merge_moments in rank
// order, then the finish by kernels/batchnorm_statistics.h's formulas; the records written
// from moments and sums; and the backward's sums per value, which the apply ops take as sums of
// count 1 with the bits the sums and the count give. The multi-rank layer is tests/dist.
#include <limits>
#include <vector>

#include "engine/distributed/ddp/sync_batchnorm.h"
#include "kernels/batchnorm_statistics.h"
#include "kernels/ops.h"
#include "tests/support/testing.h"

using namespace bareyolo;
using namespace bareyolo::testing;

namespace {

// Drawn, not constant: a formula the compiler could fold differently in the test than in the
// op (contracting other products into FMAs) would not give the op's bits.
ops::BatchNormParams random_params(Rng& rng) {
  return {random_vector<double>(rng, 1, 1e-5, 1e-2)[0],
          random_vector<double>(rng, 1, 0.01, 0.5)[0]};
}
constexpr int64_t kChannels = 4;
// Each rank's record sits in a longer one, after another layer's, as in a shared meeting.
constexpr int64_t kOffset = 5, kRecord = 1 + 2 * kChannels, kStride = kOffset + kRecord + 3;

// Rank moments with a large mean (M2 small beside it) and unequal counts.
std::vector<dist::ChannelMoments> random_ranks(Rng& rng, const std::vector<int64_t>& counts) {
  std::vector<dist::ChannelMoments> ranks;
  for (int64_t count : counts)
    ranks.push_back({count, random_vector<double>(rng, kChannels, 40, 60),
                     random_vector<double>(rng, kChannels, 0.5, 30)});
  return ranks;
}

// The ranks' records as an all-gather leaves them: rank r's at r * kStride + kOffset, every
// other value NaN (read by mistake, it poisons the results).
std::vector<double> gathered_records(const std::vector<dist::ChannelMoments>& ranks) {
  std::vector<double> gathered(ranks.size() * kStride, std::numeric_limits<double>::quiet_NaN());
  for (size_t r = 0; r < ranks.size(); ++r) {
    double* record = gathered.data() + r * kStride + kOffset;
    record[0] = double(ranks[r].count);
    for (int64_t c = 0; c < kChannels; ++c) {
      record[1 + c] = ranks[r].mean[c];
      record[1 + kChannels + c] = ranks[r].m2[c];
    }
  }
  return gathered;
}

template <class T>
struct LayerStatistics {
  std::vector<T> running_mean, running_var, save_mean, save_invstd;
  double total_count = 0;
};

template <class T>
LayerStatistics<T> random_running_statistics(Rng& rng) {
  return {random_vector<T>(rng, kChannels, -1, 1), random_vector<T>(rng, kChannels, 0.5, 2),
          std::vector<T>(kChannels), std::vector<T>(kChannels)};
}

template <class T>
void statistics_from_records(const std::vector<double>& gathered, int64_t ranks,
                             ops::BatchNormParams params, LayerStatistics<T>& layer) {
  ops::batchnorm_statistics_from_records<T>(gathered.data() + kOffset, ranks, kStride, kChannels,
                                            params, Device::cpu(), layer.running_mean.data(),
                                            layer.running_var.data(), layer.save_mean.data(),
                                            layer.save_invstd.data(), &layer.total_count);
}

}  // namespace

TEST_CASE_TEMPLATE("batchnorm_statistics_from_records merges 3 ranks as merge_moments, bit for bit",
                   T, float, double) {
  Rng rng(21);
  const ops::BatchNormParams params = random_params(rng);
  const std::vector<dist::ChannelMoments> ranks = random_ranks(rng, {5, 17, 9});
  LayerStatistics<T> got = random_running_statistics<T>(rng);
  const LayerStatistics<T> before = got;
  statistics_from_records(gathered_records(ranks), 3, params, got);

  dist::ChannelMoments whole;
  for (const dist::ChannelMoments& rank : ranks) whole = dist::merge_moments(whole, rank);
  CHECK(got.total_count == double(whole.count));
  for (int64_t c = 0; c < kChannels; ++c) {
    CAPTURE(c);
    const T mean = static_cast<T>(whole.mean[c]);
    const ops::batchnorm::ChannelStatistics want = ops::batchnorm::channel_statistics(
        mean, whole.m2[c], whole.count, before.running_mean[c], before.running_var[c], params);
    CHECK(got.save_mean[c] == mean);
    CHECK(got.save_invstd[c] == static_cast<T>(want.invstd));
    CHECK(got.running_mean[c] == static_cast<T>(want.running_mean));
    CHECK(got.running_var[c] == static_cast<T>(want.running_var));
  }
}

TEST_CASE("batchnorm_statistics_from_records: a rank of no values changes nothing") {
  Rng rng(22);
  const ops::BatchNormParams params = random_params(rng);
  std::vector<dist::ChannelMoments> ranks = random_ranks(rng, {5, 17, 9});
  LayerStatistics<double> three = random_running_statistics<double>(rng), four = three;
  statistics_from_records(gathered_records(ranks), 3, params, three);
  ranks.insert(ranks.begin() + 1, dist::ChannelMoments{0, std::vector<double>(kChannels, 7.0),
                                                       std::vector<double>(kChannels, 3.0)});
  statistics_from_records(gathered_records(ranks), 4, params, four);
  CHECK(four.total_count == three.total_count);
  CHECK(four.save_mean == three.save_mean);
  CHECK(four.save_invstd == three.save_invstd);
  CHECK(four.running_var == three.running_var);
}

TEST_CASE_TEMPLATE("batchnorm_moments_record writes the record the merge reads", T, float, double) {
  Rng rng(23);
  const std::vector<T> mean = random_vector<T>(rng, kChannels, 40, 60),
                       m2 = random_vector<T>(rng, kChannels, 0.5, 30);
  std::vector<double> record(kRecord, std::numeric_limits<double>::quiet_NaN());
  ops::batchnorm_moments_record<T>(mean.data(), m2.data(), kChannels, 12, Device::cpu(),
                                   record.data());
  CHECK(record[0] == 12);
  for (int64_t c = 0; c < kChannels; ++c) {
    CHECK(record[1 + c] == double(mean[c]));
    CHECK(record[1 + kChannels + c] == double(m2[c]));
  }
}

TEST_CASE_TEMPLATE("batchnorm_sums_record adds into dgamma and dbeta and widens the sums", T, float,
                   double) {
  Rng rng(24);
  const std::vector<T> sum_dy = random_vector<T>(rng, kChannels, -3, 3),
                       sum_dy_xhat = random_vector<T>(rng, kChannels, -3, 3);
  const std::vector<T> dgamma_before = random_vector<T>(rng, kChannels, -1, 1),
                       dbeta_before = random_vector<T>(rng, kChannels, -1, 1);
  std::vector<T> dgamma = dgamma_before, dbeta = dbeta_before;
  std::vector<double> record(2 * kChannels, std::numeric_limits<double>::quiet_NaN());
  ops::batchnorm_sums_record<T>(sum_dy.data(), sum_dy_xhat.data(), kChannels, Device::cpu(),
                                dgamma.data(), dbeta.data(), record.data());
  for (int64_t c = 0; c < kChannels; ++c) {
    CHECK(dgamma[c] == T(dgamma_before[c] + sum_dy_xhat[c]));
    CHECK(dbeta[c] == T(dbeta_before[c] + sum_dy[c]));
    CHECK(record[c] == double(sum_dy[c]));
    CHECK(record[kChannels + c] == double(sum_dy_xhat[c]));
  }
}

// The apply with the sums per value and a count of 1 gives the bits of the apply with the sums
// (rounded to T) and their count: what SyncBatchNorm's backward relies on.
TEST_CASE_TEMPLATE("batchnorm_mean_sums feed the apply ops the bits of the sums and the count", T,
                   float, double) {
  Rng rng(25);
  const Shape4 s{3, kChannels, 2, 3};
  const int64_t count = 31;  // over all ranks: more than this rank's 3 * 2 * 3
  const double total_count = double(count);
  const std::vector<double> sums = random_vector<double>(rng, 2 * kChannels, -20, 20);
  std::vector<T> x = random_vector<T>(rng, s.numel(), -2, 2),
                 dy = random_vector<T>(rng, s.numel(), -1, 1);
  const std::vector<T> mean = random_vector<T>(rng, kChannels, -0.5, 0.5),
                       invstd = random_vector<T>(rng, kChannels, 0.5, 2),
                       gamma = random_vector<T>(rng, kChannels, 0.5, 1.5),
                       beta = random_vector<T>(rng, kChannels, -0.5, 0.5);
  std::vector<T> mean_dy(kChannels), mean_dy_xhat(kChannels);
  ops::batchnorm_mean_sums<T>(sums.data(), kChannels, &total_count, Device::cpu(), mean_dy.data(),
                              mean_dy_xhat.data());
  const std::vector<T> sum_dy(sums.begin(), sums.begin() + kChannels),
      sum_dy_xhat(sums.begin() + kChannels, sums.end());
  for (int64_t c = 0; c < kChannels; ++c) CHECK(mean_dy[c] == sum_dy[c] / T(count));

  const View<const T> xv = dense_view<const T>(x.data(), s),
                      dyv = dense_view<const T>(dy.data(), s);
  std::vector<T> dx_per_value(s.numel(), T(0.25)), dx_sums(s.numel(), T(0.25));
  ops::batchnorm_backward_apply<T>(xv, dyv, mean.data(), invstd.data(), gamma.data(),
                                   mean_dy.data(), mean_dy_xhat.data(), 1,
                                   dense_view(dx_per_value.data(), s));
  ops::batchnorm_backward_apply<T>(xv, dyv, mean.data(), invstd.data(), gamma.data(), sum_dy.data(),
                                   sum_dy_xhat.data(), count, dense_view(dx_sums.data(), s));
  CHECK(dx_per_value == dx_sums);

  // The fused op's two phases share dx: each apply gets what its reduce left.
  std::vector<T> silu_per_value(s.numel()), silu_sums(s.numel()), unused_dy(kChannels),
      unused_dy_xhat(kChannels);
  for (std::vector<T>* dx : {&silu_per_value, &silu_sums})
    ops::batchnorm_silu_backward_reduce<T>(xv, dyv, mean.data(), invstd.data(), gamma.data(),
                                           beta.data(), unused_dy.data(), unused_dy_xhat.data(),
                                           dense_view(dx->data(), s));
  ops::batchnorm_silu_backward_apply<T>(xv, dyv, mean.data(), invstd.data(), gamma.data(),
                                        beta.data(), mean_dy.data(), mean_dy_xhat.data(), 1,
                                        dense_view(silu_per_value.data(), s));
  ops::batchnorm_silu_backward_apply<T>(xv, dyv, mean.data(), invstd.data(), gamma.data(),
                                        beta.data(), sum_dy.data(), sum_dy_xhat.data(), count,
                                        dense_view(silu_sums.data(), s));
  CHECK(silu_per_value == silu_sums);
}
