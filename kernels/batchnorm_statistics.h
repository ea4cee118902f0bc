// kernels/batchnorm_statistics.h — BatchNorm's per-channel moments and statistics, written once
// for the host and the GPU (BAREYOLO_HOST_DEVICE).
//
// Two sets' moments merged (Chan, Golub and LeVeque's pairwise update), as one set's would be:
//   mean = mean_a + delta n_b / n,  M2 = M2_a + M2_b + delta^2 n_a n_b / n,  delta = mean_b -
//   mean_a
// in the moments' own type: the CPU's planes and SyncBatchNorm's ranks in double
// (kernels/cpu/batchnorm_channel.h, engine/distributed/ddp/sync_batchnorm.cpp), the GPU's
// partial sums in float (kernels/cuda/batchnorm.cu). Merging into empty moments (n_a = 0) gives
// b's bits.
//
// The statistics from a channel's moments, in double whatever the values' type:
//   invstd       = 1 / sqrt(variance + eps),  variance = M2 / count (biased, for normalising)
//   running_mean = (1 - momentum) running_mean + momentum mean
//   running_var  = (1 - momentum) running_var + momentum M2 / (count - 1)   (unbiased, as PyTorch)
// Its callers: the CPU op (batchnorm_statistics_from_moments, and the running invstd the eval
// ops normalise by, kernels/cpu/batchnorm.cpp), their CUDA kernels (kernels/cuda/batchnorm.cu)
// and SyncBatchNorm's finish from the moments of the whole batch (engine/layers/batchnorm2d.cpp).
// Each widens its values to double and rounds the results to its own type, so all three give
// the same statistics, bit for bit, from the same moments.
#pragma once

#include <math.h>
#include <stdint.h>

#include "kernels/ops.h"   // BatchNormParams
#include "kernels/view.h"  // BAREYOLO_HOST_DEVICE

namespace bareyolo::ops::batchnorm {

template <class T>
struct MeanM2 {
  T mean, m2;
};

template <class T>
BAREYOLO_HOST_DEVICE inline MeanM2<T> merged_moments(T count_a, T mean_a, T m2_a, T count_b,
                                                     T mean_b, T m2_b) {
  const T count = count_a + count_b, delta = mean_b - mean_a;
  return {mean_a + delta * (count_b / count),
          m2_a + m2_b + delta * delta * (count_a * count_b / count)};
}

BAREYOLO_HOST_DEVICE inline double inverse_std(double variance, double eps) {
  return 1.0 / ::sqrt(variance + eps);
}

struct ChannelStatistics {
  double invstd, running_mean, running_var;
};

// From a channel's mean and M2 over `count` (>= 2) values and its running statistics before.
BAREYOLO_HOST_DEVICE inline ChannelStatistics channel_statistics(double mean, double m2,
                                                                 int64_t count, double running_mean,
                                                                 double running_var,
                                                                 BatchNormParams p) {
  return {inverse_std(m2 / double(count), p.eps),
          (1 - p.momentum) * running_mean + p.momentum * mean,
          (1 - p.momentum) * running_var + p.momentum * m2 / double(count - 1)};
}

}  // namespace bareyolo::ops::batchnorm
