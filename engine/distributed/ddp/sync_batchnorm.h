// engine/distributed/ddp/sync_batchnorm.h — how SyncBatchNorm's per-channel statistics cross ranks.
//
// Each rank holds a slice of the batch. BatchNorm in training normalises by the statistics
// of the WHOLE batch, so between the two phases of the BN ops (kernels/ops.h) the ranks
// combine their partial statistics:
//
//   forward:  every rank computes (count, mean, M2) per channel over its own slice
//             (batchnorm_moments) and writes it as a record of doubles
//             (batchnorm_moments_record); allgather_moment_records() collects every rank's,
//             and each rank merges them in rank order with Chan's parallel formula
//                 n = na + nb,  d = mean_b - mean_a,
//                 mean = mean_a + d * nb / n,  M2 = M2_a + M2_b + d^2 * na * nb / n
//             in double (batchnorm_statistics_from_records). This is exact algebra (no sum of
//             squares that cancels when |mean| >> std), handles unequal slices through the
//             counts, and gives the same bits on every rank — so the running statistics stay
//             identical everywhere.
//   backward: the input gradient needs sum(dy) and sum(dy * xhat) over the whole batch;
//             allreduce_channel_sums() sums each rank's per-channel values.
//
// The records and sums are tensors on the layer's device, and the collectives move them there:
// NCCL a GPU's memory, the TCP ring and shared memory a CPU rank's, so no value visits the host
// in a training step. The gradients of gamma and beta are NOT combined here: each rank keeps
// the sums over its own slice, and the gradient reducer averages them with every other
// parameter gradient.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "engine/distributed/comm/communicator.h"

namespace bareyolo::dist {

// Every rank's `record` (a dense f64 tensor of the same size on each), gathered in rank order
// into `gathered` (world-size records on the record's device; a dense f64 tensor is made there
// unless it already is one of that size, as a layer keeps it from step to step). `tag` names the
// meeting in the collective's fingerprint ("SyncBN model.2.cv1.bn").
void allgather_moment_records(Communicator& comm, Tensor& record, Tensor& gathered,
                              std::string_view tag);

// Sums `sums` (a dense f64 tensor) over all ranks, in place; `tag` as above.
void allreduce_channel_sums(Communicator& comm, Tensor& sums, std::string_view tag);

// ---- the reference the device merge (batchnorm_statistics_from_records) is held to ----

// Per-channel statistics of `count` values per channel.
struct ChannelMoments {
  int64_t count = 0;
  std::vector<double> mean, m2;  // m2 = sum of squared deviations from the mean
};

// The moments of the union of two disjoint sets (either may be empty).
ChannelMoments merge_moments(const ChannelMoments& a, const ChannelMoments& b);

}  // namespace bareyolo::dist
