// kernels/cpu/batchnorm_sync.cpp — SyncBatchNorm's per-channel steps between its collectives
// (kernels/ops.h): this rank's moments and backward sums into the double records the ranks
// exchange, and back from the exchanged records into the layer's statistics and the apply
// ops' sums. A few values per channel, one loop each; views on a GPU go to
// kernels/cuda/batchnorm_sync.cu, where every pointer is device memory.
#include <cstdint>

#include "kernels/batchnorm_statistics.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/ops.h"
#include "kernels/route.h"

namespace bareyolo::ops {

template <class T>
void batchnorm_moments_record(const T* mean, const T* m2, int64_t channels, int64_t count,
                              Device device, double* record) {
  BAREYOLO_ROUTE_TO_CUDA(batchnorm_moments_record, device, mean, m2, channels, count, device.index,
                         record);
  record[0] = static_cast<double>(count);
  for (int64_t c = 0; c < channels; ++c) {
    record[1 + c] = mean[c];
    record[1 + channels + c] = m2[c];
  }
}

template <class T>
void batchnorm_statistics_from_records(const double* records, int64_t ranks, int64_t record_stride,
                                       int64_t channels, BatchNormParams p, Device device,
                                       T* running_mean, T* running_var, T* save_mean,
                                       T* save_invstd, double* total_count) {
  BAREYOLO_ROUTE_TO_CUDA(batchnorm_statistics_from_records, device, records, ranks, record_stride,
                         channels, p, device.index, running_mean, running_var, save_mean,
                         save_invstd, total_count);
  double count = 0;
  for (int64_t c = 0; c < channels; ++c) {
    const batchnorm::MergedRecords merged =
        batchnorm::merged_records(records, ranks, record_stride, channels, c);
    // The mean as save_mean holds it (rounded to T), M2 in double: never rounded.
    const T mean = static_cast<T>(merged.mean);
    const batchnorm::ChannelStatistics statistics = batchnorm::channel_statistics(
        mean, merged.m2, static_cast<int64_t>(merged.count), running_mean[c], running_var[c], p);
    save_mean[c] = mean;
    save_invstd[c] = static_cast<T>(statistics.invstd);
    running_mean[c] = static_cast<T>(statistics.running_mean);
    running_var[c] = static_cast<T>(statistics.running_var);
    count = merged.count;
  }
  *total_count = count;
}

template <class T>
void batchnorm_sums_record(const T* sum_dy, const T* sum_dy_xhat, int64_t channels, Device device,
                           T* dgamma, T* dbeta, double* record) {
  BAREYOLO_ROUTE_TO_CUDA(batchnorm_sums_record, device, sum_dy, sum_dy_xhat, channels, device.index,
                         dgamma, dbeta, record);
  for (int64_t c = 0; c < channels; ++c) {
    dgamma[c] += sum_dy_xhat[c];
    dbeta[c] += sum_dy[c];
    record[c] = sum_dy[c];
    record[channels + c] = sum_dy_xhat[c];
  }
}

template <class T>
void batchnorm_mean_sums(const double* sums, int64_t channels, const double* total_count,
                         Device device, T* mean_dy, T* mean_dy_xhat) {
  BAREYOLO_ROUTE_TO_CUDA(batchnorm_mean_sums, device, sums, channels, total_count, device.index,
                         mean_dy, mean_dy_xhat);
  const T count = static_cast<T>(*total_count);
  for (int64_t c = 0; c < channels; ++c) {
    mean_dy[c] = static_cast<T>(sums[c]) / count;
    mean_dy_xhat[c] = static_cast<T>(sums[channels + c]) / count;
  }
}

#define BAREYOLO_INSTANTIATE_BATCHNORM_SYNC(T)                                                     \
  template void batchnorm_moments_record<T>(const T*, const T*, int64_t, int64_t, Device,          \
                                            double*);                                              \
  template void batchnorm_statistics_from_records<T>(                                              \
      const double*, int64_t, int64_t, int64_t, BatchNormParams, Device, T*, T*, T*, T*, double*); \
  template void batchnorm_sums_record<T>(const T*, const T*, int64_t, Device, T*, T*, double*);    \
  template void batchnorm_mean_sums<T>(const double*, int64_t, const double*, Device, T*, T*);
BAREYOLO_INSTANTIATE_BATCHNORM_SYNC(float)
BAREYOLO_INSTANTIATE_BATCHNORM_SYNC(double)

}  // namespace bareyolo::ops
