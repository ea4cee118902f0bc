// kernels/batchnorm_statistics.h — BatchNorm's per-channel moments and statistics, written once
// for the host and the GPU (BAREYOLO_HOST_DEVICE).
//
// Two sets' moments merged (Chan, Golub and LeVeque's pairwise update), as one set's would be:
//   mean = mean_a + delta n_b / n,  M2 = M2_a + M2_b + delta^2 n_a n_b / n,  delta = mean_b -
//   mean_a
// in the moments' own type: the CPU's planes and SyncBatchNorm's ranks in double
// (kernels/cpu/batchnorm_channel.h, merged_records below), the GPU's partial sums in float
// (kernels/cuda/batchnorm.cu). Merging into empty moments (n_a = 0) gives b's bits.
//
// The statistics from a channel's moments, in double whatever the values' type:
//   invstd       = 1 / sqrt(variance + eps),  variance = M2 / count (biased, for normalising)
//   running_mean = (1 - momentum) running_mean + momentum mean
//   running_var  = (1 - momentum) running_var + momentum M2 / (count - 1)   (unbiased, as PyTorch)
// Its callers: the CPU ops (batchnorm_statistics_from_moments and, from the moments of the
// whole batch over SyncBatchNorm's ranks, batchnorm_statistics_from_records; the running invstd
// the eval ops normalise by: kernels/cpu/batchnorm.cpp, batchnorm_sync.cpp) and their CUDA
// kernels (kernels/cuda/batchnorm.cu, batchnorm_sync.cu). Each widens its values to double and
// rounds the results to its own type, so all give the same statistics from the same moments.
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

// Channel c's moments over SyncBatchNorm's ranks: their records ([count, mean_0 .. mean_{C-1},
// M2_0 .. M2_{C-1}] each, ops::batchnorm_moments_record; rank r's `stride` values after rank
// r - 1's) merged in rank order, so every rank gets the same bits. A rank of no values changes
// nothing; the first rank's moments are taken as they are (what dist::merge_moments does).
struct MergedRecords {
  double count, mean, m2;
};
BAREYOLO_HOST_DEVICE inline MergedRecords merged_records(const double* records, int64_t ranks,
                                                         int64_t stride, int64_t channels,
                                                         int64_t c) {
  MergedRecords total{0, 0, 0};
  for (int64_t r = 0; r < ranks; ++r) {
    const double* record = records + r * stride;
    const double count = record[0], mean = record[1 + c], m2 = record[1 + channels + c];
    if (count == 0) continue;
    if (total.count == 0) {
      total = {count, mean, m2};
      continue;
    }
    const MeanM2<double> merged =
        merged_moments(total.count, total.mean, total.m2, count, mean, m2);
    total = {total.count + count, merged.mean, merged.m2};
  }
  return total;
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
