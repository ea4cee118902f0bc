// tests/cuda/batchnorm_sync.cpp — SyncBatchNorm's steps between its collectives on the GPU
// (kernels/cuda/batchnorm_sync.cu) against the CPU ops, on random records and sums, every
// output poisoned (NaN) first so that a value a kernel fails to write fails the comparison. The
// copies and the float additions and divisions must give the CPU's bits; the merge and the
// finish, in double on both, may differ where nvcc contracts another product into an FMA than
// the host compiler does, by an ulp of a double: a float ulp covers it.
#include <algorithm>
#include <limits>
#include <vector>

#include "engine/tensor.h"
#include "kernels/ops.h"
#include "tests/support/testing.h"

using namespace bareyolo;
using namespace bareyolo::testing;

namespace {

const Device kGpu = Device::cuda(0);
constexpr int64_t kChannels = 300;  // three blocks of the kernels' 128 threads, the last partial
constexpr double kFloatUlp = 1.2e-7;

// `count` values, NaN, as a (1, count, 1, 1) tensor on `device`.
template <class T>
Tensor poisoned(int64_t count, Device device) {
  return Tensor::from_vector(std::vector<T>(size_t(count), std::numeric_limits<T>::quiet_NaN()),
                             {1, count, 1, 1}, device);
}

template <class T>
Tensor channel_values(const std::vector<T>& values, Device device) {
  return Tensor::from_vector(values, {1, int64_t(values.size()), 1, 1}, device);
}

// The statistics' tensors of one layer on one device.
struct Statistics {
  Tensor running_mean, running_var, save_mean, save_invstd, total_count;
  Statistics(const std::vector<float>& running_mean_before,
             const std::vector<float>& running_var_before, Device device)
      : running_mean(channel_values(running_mean_before, device)),
        running_var(channel_values(running_var_before, device)),
        save_mean(poisoned<float>(kChannels, device)),
        save_invstd(poisoned<float>(kChannels, device)),
        total_count(poisoned<double>(1, device)) {}
};

void statistics_from_records(const Tensor& records, int64_t ranks, int64_t stride,
                             Statistics& out) {
  ops::batchnorm_statistics_from_records<float>(
      records.view<double>().data, ranks, stride, kChannels, {1e-3, 0.03}, records.device(),
      out.running_mean.view<float>().data, out.running_var.view<float>().data,
      out.save_mean.view<float>().data, out.save_invstd.view<float>().data,
      out.total_count.view<double>().data);
}

}  // namespace

TEST_CASE("cuda SyncBN: moments records are the CPU's, bit for bit") {
  Rng rng(41);
  const std::vector<float> mean = random_vector<float>(rng, kChannels, 40, 60),
                           m2 = random_vector<float>(rng, kChannels, 0.5, 30);
  std::vector<double> got, want;
  for (Device device : {kGpu, Device::cpu()}) {
    const Tensor mean_on = channel_values(mean, device), m2_on = channel_values(m2, device);
    Tensor record = poisoned<double>(1 + 2 * kChannels, device);
    ops::batchnorm_moments_record<float>(mean_on.view<float>().data, m2_on.view<float>().data,
                                         kChannels, 23, device, record.view<double>().data);
    (device == kGpu ? got : want) = record.to_doubles();
  }
  CHECK(got == want);
}

TEST_CASE("cuda SyncBN: 3 ranks' records merge and finish as on the CPU") {
  Rng rng(42);
  // Three ranks' records of unequal counts, each in a longer stride, as a shared meeting's.
  const int64_t ranks = 3, record = 1 + 2 * kChannels, stride = record + 4;
  std::vector<double> gathered(size_t(ranks * stride), std::numeric_limits<double>::quiet_NaN());
  const int64_t counts[] = {12, 7, 30};
  for (int64_t r = 0; r < ranks; ++r) {
    double* at = gathered.data() + r * stride;
    at[0] = double(counts[r]);
    const std::vector<double> mean = random_vector<double>(rng, kChannels, 40, 60),
                              m2 = random_vector<double>(rng, kChannels, 0.5, 30);
    std::copy(mean.begin(), mean.end(), at + 1);
    std::copy(m2.begin(), m2.end(), at + 1 + kChannels);
  }
  const std::vector<float> running_mean = random_vector<float>(rng, kChannels, -1, 1),
                           running_var = random_vector<float>(rng, kChannels, 0.5, 2);
  Statistics gpu(running_mean, running_var, kGpu), cpu(running_mean, running_var, Device::cpu());
  statistics_from_records(channel_values(gathered, kGpu), ranks, stride, gpu);
  statistics_from_records(channel_values(gathered, Device::cpu()), ranks, stride, cpu);
  CHECK(gpu.total_count.to_doubles() == cpu.total_count.to_doubles());
  check_close(gpu.save_mean.to_doubles(), cpu.save_mean.to_doubles(), kFloatUlp, 0, "save_mean");
  check_close(gpu.save_invstd.to_doubles(), cpu.save_invstd.to_doubles(), kFloatUlp, 0,
              "save_invstd");
  check_close(gpu.running_mean.to_doubles(), cpu.running_mean.to_doubles(), kFloatUlp, 0,
              "running_mean");
  check_close(gpu.running_var.to_doubles(), cpu.running_var.to_doubles(), kFloatUlp, 0,
              "running_var");
}

TEST_CASE("cuda SyncBN: backward sums' record and per-value sums are the CPU's, bit for bit") {
  Rng rng(43);
  const std::vector<float> sum_dy = random_vector<float>(rng, kChannels, -3, 3),
                           sum_dy_xhat = random_vector<float>(rng, kChannels, -3, 3),
                           dgamma = random_vector<float>(rng, kChannels, -1, 1),
                           dbeta = random_vector<float>(rng, kChannels, -1, 1);
  const std::vector<double> all_reduced = random_vector<double>(rng, 2 * kChannels, -50, 50);
  const std::vector<double> total_count = {57};
  struct Results {
    std::vector<double> dgamma, dbeta, record, mean_dy, mean_dy_xhat;
  };
  Results got, want;
  for (Device device : {kGpu, Device::cpu()}) {
    Results& results = device == kGpu ? got : want;
    const Tensor sum_dy_on = channel_values(sum_dy, device),
                 sum_dy_xhat_on = channel_values(sum_dy_xhat, device);
    Tensor dgamma_on = channel_values(dgamma, device), dbeta_on = channel_values(dbeta, device);
    Tensor record = poisoned<double>(2 * kChannels, device);
    ops::batchnorm_sums_record<float>(
        sum_dy_on.view<float>().data, sum_dy_xhat_on.view<float>().data, kChannels, device,
        dgamma_on.view<float>().data, dbeta_on.view<float>().data, record.view<double>().data);
    const Tensor sums = channel_values(all_reduced, device),
                 count = channel_values(total_count, device);
    Tensor mean_dy = poisoned<float>(kChannels, device),
           mean_dy_xhat = poisoned<float>(kChannels, device);
    ops::batchnorm_mean_sums<float>(sums.view<double>().data, kChannels, count.view<double>().data,
                                    device, mean_dy.view<float>().data,
                                    mean_dy_xhat.view<float>().data);
    results = {dgamma_on.to_doubles(), dbeta_on.to_doubles(), record.to_doubles(),
               mean_dy.to_doubles(), mean_dy_xhat.to_doubles()};
  }
  CHECK(got.dgamma == want.dgamma);
  CHECK(got.dbeta == want.dbeta);
  CHECK(got.record == want.record);
  CHECK(got.mean_dy == want.mean_dy);
  CHECK(got.mean_dy_xhat == want.mean_dy_xhat);
}
