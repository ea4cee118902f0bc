// engine/distributed/comm/tcp_ring.h — the TCP ring communicator: the Gloo-like backend of the
// Communicator contract (communicator.h), for CPU ranks and for ranks sharing a GPU.
//
// Collectives run on one background comm thread per rank, in issue order; allreduce() and the
// others only queue the work and return, so the caller computes while the bytes move. (For a
// large collective the link's own receiving thread takes the incoming direction, so sending
// and receiving run at once.) A small one on host memory (at most 64 KB, latency-bound:
// SyncBN's statistics, the loss's counts) that finds no other queued or running runs on the
// caller's thread and returns complete: a 4 KB allreduce between 2 ranks on loopback took
// 16-39 us through the comm thread, ~10.5 us so. The connections, frames and failure protocol are
// in ring_link.h; the schedules of the collectives (which chunk goes where at which step) are
// commented in tcp_ring.cpp.
//
// Buffers in GPU memory are staged through host memory on the comm thread (copies on the
// GPU's compute stream), which is what `--device 0,0` (two ranks on one GPU) runs on.
//
// After a failure (a lost rank, a timeout) the communicator is broken: the failed Work and
// every later call throw the same message, which names the lost rank.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "engine/distributed/comm/communicator.h"
#include "engine/distributed/comm/store.h"

namespace bareyolo::dist {

// Joins the ring of `world_size` >= 2 ranks through `store` (every rank calls it; ranks listen
// on the interface facing `master_addr`, loopback for a local master). Each rank proves to its
// neighbour that it holds `token` (never sending it); `timeout` bounds the set-up and each
// collective.
std::unique_ptr<Communicator> make_tcp_ring_communicator(
    Store& store, int rank, int world_size, const std::string& master_addr,
    const std::string& token, std::chrono::milliseconds timeout = kDefaultStoreTimeout);

}  // namespace bareyolo::dist
