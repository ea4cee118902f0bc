// bench/compute_throughput.h — how many FMAs per second this host's cores give at 1 and 2
// threads, printed beside the step's thread scaling (bench_train, bench_model).
//
// A second thread can speed up even a pass that never leaves the registers only as far as the
// host gives it a second core's worth of arithmetic. On the shared 2-vCPU VMs this project
// runs on it does not always: a loop of independent FMAs ran 1.43x to 2.09x faster on two
// threads than on one from one second to the next (a neighbour on the sibling hyperthread or
// the same core, the clock). So the benches measure it in the same run, next to each round of
// the step they scale, and the step's scaling can be read against it.
#pragma once

namespace bareyolo::bench {

// GFLOP/s of `threads` std::threads together, each running independent chains of 8-lane FMAs
// held in registers (no memory traffic) for ~40 ms.
double fma_gflop_s(int threads);

struct ComputeScaling {
  double one_thread = 0, two_threads = 0;  // GFLOP/s, medians
  double ratio = 0;                        // the median of the turns' 2-thread / 1-thread
};
// Seven turns of 1 thread then 2 (about half a second).
ComputeScaling measure_compute_scaling();

}  // namespace bareyolo::bench
