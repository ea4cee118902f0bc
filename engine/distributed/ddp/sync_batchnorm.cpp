// engine/distributed/ddp/sync_batchnorm.cpp — see sync_batchnorm.h.
#include "engine/distributed/ddp/sync_batchnorm.h"

#include <stdexcept>
#include <string>

#include "engine/tensor_factories.h"
#include "kernels/batchnorm_statistics.h"

namespace bareyolo::dist {

namespace {

// `values` as a tensor on `staging`: a backend that moves only device buffers (NCCL) gets
// them on the GPU; the TCP ring works on host memory.
Tensor staged(const std::vector<double>& values, Device staging) {
  return Tensor::from_vector(values, {1, int64_t(values.size()), 1, 1}, staging);
}

}  // namespace

void allgather_moment_records(Communicator& comm, Tensor& record, Tensor& gathered,
                              std::string_view tag) {
  ensure_tensor(gathered, {1, record.numel() * comm.world_size(), 1, 1}, record.device(),
                DType::f64);
  comm.allgather(CommBuffer::of(record), CommBuffer::of(gathered), tag)->wait();
}

void allreduce_channel_sums(Communicator& comm, Tensor& sums, std::string_view tag) {
  comm.allreduce(CommBuffer::of(sums), ReduceOp::sum, tag)->wait();
}

ChannelMoments merge_moments(const ChannelMoments& a, const ChannelMoments& b) {
  if (a.count == 0) return b;
  if (b.count == 0) return a;
  if (a.mean.size() != b.mean.size())
    throw std::invalid_argument("merge_moments: " + std::to_string(a.mean.size()) + " and " +
                                std::to_string(b.mean.size()) + " channels");
  ChannelMoments merged;
  merged.count = a.count + b.count;
  merged.mean.resize(a.mean.size());
  merged.m2.resize(a.mean.size());
  const double na = double(a.count), nb = double(b.count);
  for (size_t c = 0; c < a.mean.size(); ++c) {
    const ops::batchnorm::MeanM2<double> channel =
        ops::batchnorm::merged_moments(na, a.mean[c], a.m2[c], nb, b.mean[c], b.m2[c]);
    merged.mean[c] = channel.mean;
    merged.m2[c] = channel.m2;
  }
  return merged;
}

ChannelMoments allgather_moments(Communicator& comm, const ChannelMoments& local, Device staging,
                                 std::string_view tag) {
  // The record of ops::batchnorm_moments_record: [count, mean_0 .. mean_{C-1}, M2_0 .. M2_{C-1}].
  const size_t channels = local.mean.size();
  const int64_t record = 1 + 2 * int64_t(channels);
  std::vector<double> values;
  values.reserve(size_t(record));
  values.push_back(double(local.count));
  values.insert(values.end(), local.mean.begin(), local.mean.end());
  values.insert(values.end(), local.m2.begin(), local.m2.end());
  Tensor send = staged(values, staging), gathered;
  allgather_moment_records(comm, send, gathered, tag);
  values = gathered.to_doubles();
  ChannelMoments total;
  for (int r = 0; r < comm.world_size(); ++r) {  // rank order: the same bits on every rank
    const double* rec = values.data() + r * record;
    ChannelMoments part;
    part.count = int64_t(rec[0]);
    part.mean.assign(rec + 1, rec + 1 + channels);
    part.m2.assign(rec + 1 + channels, rec + 1 + 2 * channels);
    total = merge_moments(total, part);
  }
  return total;
}

void allreduce_channel_sums(Communicator& comm, std::vector<double>& a, std::vector<double>& b,
                            Device staging, std::string_view tag) {
  std::vector<double> both(a);
  both.insert(both.end(), b.begin(), b.end());
  Tensor sums = staged(both, staging);
  allreduce_channel_sums(comm, sums, tag);
  both = sums.to_doubles();
  a.assign(both.begin(), both.begin() + int64_t(a.size()));
  b.assign(both.begin() + int64_t(a.size()), both.end());
}

}  // namespace bareyolo::dist
