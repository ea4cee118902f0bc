// engine/distributed/comm/shm_communicator.h — the shared-memory communicator: the Communicator
// contract (communicator.h) for CPU ranks on one host, through one /dev/shm segment per job
// (shm_segment.h) instead of loopback sockets.
//
// No bytes go through the kernel: a rank copies its buffer into its slot of the segment, meets
// the others (shm_meetings.h: counters in the segment, a short spin, then a futex), and reads
// theirs. allreduce is a reduce-scatter and an all-gather: each rank's own thread reduces its
// 1/N slice of every rank's data, in cache-sized chunks, and the ranks then copy each other's
// reduced slices; a small one (kSmallAllreduceBytes) is one meeting, after which each rank sums
// all the buffers itself. Either way every element is summed in rank order, so every rank ends
// with the same bits, and for 2 ranks with the TCP ring's (a + b == b + a); bf16 sums in float,
// rounded once. broadcast and allgather copy through the slots the same way, a slot at a time.
//
// Collectives run on the calling thread and return complete: the copies are the work (there is
// no wire to wait on), so a comm thread would only add two wake-ups per collective; the caller's
// wait for its peers to reach the same collective is the step's own synchronisation. Calls from
// several threads are taken one at a time.
//
// After a failure (a rank that died, left or stalled past the timeout, a desync) the
// communicator is broken: the failed Work and every later call throw the same message, the
// same on every rank, naming the rank at fault.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "engine/distributed/comm/communicator.h"
#include "engine/distributed/comm/store.h"

namespace bareyolo::dist {

// Joins the segment of `world_size` >= 2 ranks on this host through `store` (every rank calls
// it, in the same order as every other communicator it makes); `token` and `store_port` name the
// segment (shm_segment.h). `timeout` bounds joining and each collective.
std::unique_ptr<Communicator> make_shm_communicator(
    Store& store, int rank, int world_size, const std::string& token, int store_port,
    std::chrono::milliseconds timeout = kDefaultStoreTimeout);

}  // namespace bareyolo::dist
