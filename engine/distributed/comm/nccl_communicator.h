// engine/distributed/comm/nccl_communicator.h — the NCCL backend of the Communicator contract
// (engine/distributed/comm/communicator.h), for ranks on distinct GPUs.
//
// Rank 0 creates the NCCL unique id and publishes it through the rendezvous store; every rank
// reads it and joins. Collectives run on one communication stream per rank, ordered after the
// compute stream's work by an event, and the compute stream waits for them by another: so
// SyncBN's statistics and the gradient buckets go through that one stream in program order
// (one communicator driven from two streams can deadlock). A watchdog aborts the
// communicator (ncclCommAbort) when a collective exceeds the timeout or a peer's failure is
// reported, so a dead peer is an error, never a hang.
//
// Defined in cuda/nccl_communicator.cpp in CUDA builds; in builds without CUDA the factory
// throws a sentence saying so (cuda/nccl_communicator_none.cpp).
#pragma once

#include <chrono>
#include <memory>
#include <optional>

#include "engine/distributed/comm/communicator.h"
#include "engine/distributed/comm/store.h"
#include "kernels/devices.h"

namespace bareyolo::dist {

// True when this binary was built with NCCL.
bool nccl_compiled();

// The NCCL this process loaded and the one it was compiled against; nullopt without NCCL.
std::optional<LibraryVersion> nccl_version();

// Joins the NCCL communicator of `world_size` ranks on GPU `cuda_device`. Every rank calls it
// with the same store (the unique id goes through the key "nccl/unique_id").
std::unique_ptr<Communicator> make_nccl_communicator(Store& store, int rank, int world_size,
                                                     int cuda_device,
                                                     std::chrono::milliseconds timeout);

}  // namespace bareyolo::dist
