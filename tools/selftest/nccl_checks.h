// tools/selftest/nccl_checks.h — the communicator half of `bareyolo selftest`: the Communicator
// contract (engine/distributed/comm/communicator.h) over NCCL across the GPUs named, one forked
// worker per GPU, as training runs them.
//
// It runs before the op checks (tools/selftest/selftest.h): the workers are forked by
// dist::launch_workers, which refuses once this process has initialised CUDA.
#pragma once

#include <vector>

#include "engine/distributed/comm/communicator.h"
#include "engine/distributed/launch/device_spec.h"
#include "tools/selftest/selftest.h"

namespace bareyolo::selftest {

// Every rank of `comm` calls it; the collectives run on buffers of `device`, each filled with
// values every rank can compute for every other rank, so that each knows the exact result:
// allreduce sum, avg and max, broadcast from the first and the last rank and allgather, of 0, 1,
// 7 and 2^20 + 3 elements of f32 and f64, then a barrier that the last rank enters late. Inputs
// are multiples of 1/8 below 1000, whose sums are exact in float in any order: sums, maxima and
// the moved values must be exact, averages within NCCL's rounding (it multiplies each rank's
// float by 1 / world before summing). Returns the number of collectives checked; throws
// std::runtime_error naming the first wrong one, the element and both values.
int check_collectives(dist::Communicator& comm, const Device& device);

// One worker per device of `devices` (forked by dist::launch_workers: this process must not have
// initialised CUDA), each joining a process group with `backend` on its device and running
// check_collectives on buffers there. `bareyolo selftest` runs NCCL on distinct GPUs (one GPU: a
// real NCCL communicator of one rank); tests run the TCP ring on CPU ranks, which exercises the
// workers and their reports without a GPU. Each worker prints one line (prefixed "[rank<N>]: " by
// the launcher) and exits 0 or 1. Returns one result per rank, in the group named by the backend
// ("nccl"), with the worker's error in full when it failed.
std::vector<CheckResult> run_collective_checks(const std::vector<Device>& devices,
                                               dist::Backend backend);

}  // namespace bareyolo::selftest
