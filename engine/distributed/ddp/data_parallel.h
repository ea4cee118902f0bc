// engine/distributed/ddp/data_parallel.h — what a rank sets up before its first data-parallel
// step, beside the reducer it ends with:
//   1. every rank takes rank 0's parameters and buffers (broadcast_state): identical starts;
//   2. SyncBatchNorm: every BatchNorm2d of the graph combines its batch statistics over the
//      ranks (sync_batchnorm.h), so N ranks x B/N images normalise like one rank x B;
//   3. the reducer (reducer.h): buckets over the gradient arena, all-reduced during backward;
// and, on GPUs, every rank runs rank 0's cuDNN algorithms (broadcast_convolution_choices).
#pragma once

#include <memory>
#include <vector>

#include "engine/distributed/ddp/reducer.h"
#include "engine/graph.h"

namespace bareyolo::dist {

struct DataParallelOptions {
  bool sync_batchnorm = true;
  double bucket_mb = 25;      // the reducer's bucket size
  bool bf16_buckets = false;  // ReducerOptions::bf16_buckets
};

std::unique_ptr<Reducer> start_data_parallel(Communicator& comm, ParameterArena& arena,
                                             const std::vector<StateEntry>& state, Graph& graph,
                                             const DataParallelOptions& options);

// Rank 0's buffers (the state entries without a gradient) on every rank. Without SyncBN each
// rank's BatchNorm running statistics follow its own images and drift apart; a sharded
// validation must score every share with the same model, rank 0's.
void broadcast_buffers(Communicator& comm, const std::vector<StateEntry>& state);

// Rank 0's cuDNN convolution choices for its `device` (kernels/convolution_choices.h), adopted
// by every rank whose GPU and cuDNN are rank 0's (its identity): each rank times the shapes it
// meets first on its own, and timing noise could make them choose differently; after this
// every rank runs rank 0's. A rank of another identity keeps its own (another GPU's choices
// may not even run there). Returns how many choices this rank adopted (0 on rank 0).
size_t broadcast_convolution_choices(Communicator& comm, const Device& device);

// Every BatchNorm2d of `graph` syncs its statistics over `comm` (null: each rank its own);
// returns how many there are.
int sync_batchnorm(Graph& graph, Communicator* comm);

}  // namespace bareyolo::dist
