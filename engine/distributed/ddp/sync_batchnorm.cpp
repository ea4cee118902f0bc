// engine/distributed/ddp/sync_batchnorm.cpp — see sync_batchnorm.h.
#include "engine/distributed/ddp/sync_batchnorm.h"

#include <stdexcept>
#include <string>

#include "engine/tensor_factories.h"
#include "kernels/batchnorm_statistics.h"

namespace bareyolo::dist {

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

}  // namespace bareyolo::dist
