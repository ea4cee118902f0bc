// bench/memory_bandwidth.h — how fast this host streams memory at 1 and 2 threads, printed
// beside the step's thread scaling (bench_train, bench_model).
//
// A pass that only streams its tensors through memory (BatchNorm's apply and statistics,
// SiLU, pooling, the adds) can speed up with a second thread only as far as the memory
// system does, and on the shared 2-core VMs this project runs on that changes by the hour:
// 9.0 GB/s at 1 thread and 9.0 at 2 in one measurement, 9.0 and 15.9 half an hour later. So
// the benches measure it in the same run as the step they scale.
#pragma once

namespace bareyolo::bench {

// GB/s (bytes read + written) of y = a x + b over buffers 4x the size of a 32 MiB L3, split
// evenly over `threads` std::threads; the best of a few repetitions.
double memory_bandwidth_gb_s(int threads);

struct MemoryScaling {
  double one_thread = 0, two_threads = 0;  // GB/s
  double ratio() const { return two_threads / one_thread; }
};
MemoryScaling measure_memory_scaling();

}  // namespace bareyolo::bench
