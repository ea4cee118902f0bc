// kernels/cuda/batchnorm_sync.cu — SyncBatchNorm's per-channel steps between its collectives on
// the GPU, so that the layer's statistics and sums never visit the host: the CPU reference's
// loops (kernels/cpu/batchnorm_sync.cpp) with one thread per channel, the merge and the finish
// written once for both (kernels/batchnorm_statistics.h). Every launch goes on the device's
// compute stream, in order with the kernels that wrote the moments and sums and with NCCL's
// collectives on them.
#include "kernels/batchnorm_statistics.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/runtime/check.h"
#include "kernels/cuda/runtime/stream.h"

namespace bareyolo::cuda {

namespace {

constexpr int kChannelThreads = 128;

unsigned channel_blocks(int64_t channels) {
  return static_cast<unsigned>((channels + kChannelThreads - 1) / kChannelThreads);
}

__device__ int64_t channel_index() { return blockIdx.x * int64_t(blockDim.x) + threadIdx.x; }

__global__ void moments_record_kernel(const float* mean, const float* m2, int64_t channels,
                                      int64_t count, double* record) {
  const int64_t c = channel_index();
  if (c >= channels) return;
  if (c == 0) record[0] = double(count);
  record[1 + c] = mean[c];
  record[1 + channels + c] = m2[c];
}

__global__ void statistics_from_records_kernel(const double* records, int64_t ranks,
                                               int64_t record_stride, int64_t channels,
                                               ops::BatchNormParams p, float* running_mean,
                                               float* running_var, float* save_mean,
                                               float* save_invstd, double* total_count) {
  const int64_t c = channel_index();
  if (c >= channels) return;
  const ops::batchnorm::MergedRecords merged =
      ops::batchnorm::merged_records(records, ranks, record_stride, channels, c);
  const float mean = float(merged.mean);  // as save_mean holds it; M2 stays in double
  const ops::batchnorm::ChannelStatistics statistics = ops::batchnorm::channel_statistics(
      mean, merged.m2, int64_t(merged.count), running_mean[c], running_var[c], p);
  save_mean[c] = mean;
  save_invstd[c] = float(statistics.invstd);
  running_mean[c] = float(statistics.running_mean);
  running_var[c] = float(statistics.running_var);
  if (c == 0) *total_count = merged.count;  // every channel's count is the same
}

__global__ void sums_record_kernel(const float* sum_dy, const float* sum_dy_xhat, int64_t channels,
                                   float* dgamma, float* dbeta, double* record) {
  const int64_t c = channel_index();
  if (c >= channels) return;
  dgamma[c] += sum_dy_xhat[c];
  dbeta[c] += sum_dy[c];
  record[c] = sum_dy[c];
  record[channels + c] = sum_dy_xhat[c];
}

__global__ void mean_sums_kernel(const double* sums, int64_t channels, const double* total_count,
                                 float* mean_dy, float* mean_dy_xhat) {
  const int64_t c = channel_index();
  if (c >= channels) return;
  const float count = float(*total_count);
  mean_dy[c] = float(sums[c]) / count;
  mean_dy_xhat[c] = float(sums[channels + c]) / count;
}

}  // namespace

void batchnorm_moments_record(const float* mean, const float* m2, int64_t channels, int64_t count,
                              int device, double* record) {
  if (channels == 0) return;
  moments_record_kernel<<<channel_blocks(channels), kChannelThreads, 0, stream_of(device)>>>(
      mean, m2, channels, count, record);
  BAREYOLO_CUDA_CHECK_LAUNCH();
}

void batchnorm_statistics_from_records(const double* records, int64_t ranks, int64_t record_stride,
                                       int64_t channels, ops::BatchNormParams p, int device,
                                       float* running_mean, float* running_var, float* save_mean,
                                       float* save_invstd, double* total_count) {
  if (channels == 0) return;
  statistics_from_records_kernel<<<channel_blocks(channels), kChannelThreads, 0,
                                   stream_of(device)>>>(records, ranks, record_stride, channels, p,
                                                        running_mean, running_var, save_mean,
                                                        save_invstd, total_count);
  BAREYOLO_CUDA_CHECK_LAUNCH();
}

void batchnorm_sums_record(const float* sum_dy, const float* sum_dy_xhat, int64_t channels,
                           int device, float* dgamma, float* dbeta, double* record) {
  if (channels == 0) return;
  sums_record_kernel<<<channel_blocks(channels), kChannelThreads, 0, stream_of(device)>>>(
      sum_dy, sum_dy_xhat, channels, dgamma, dbeta, record);
  BAREYOLO_CUDA_CHECK_LAUNCH();
}

void batchnorm_mean_sums(const double* sums, int64_t channels, const double* total_count,
                         int device, float* mean_dy, float* mean_dy_xhat) {
  if (channels == 0) return;
  mean_sums_kernel<<<channel_blocks(channels), kChannelThreads, 0, stream_of(device)>>>(
      sums, channels, total_count, mean_dy, mean_dy_xhat);
  BAREYOLO_CUDA_CHECK_LAUNCH();
}

}  // namespace bareyolo::cuda
