// engine/distributed/ddp/data_parallel.cpp — see data_parallel.h.
#include "engine/distributed/ddp/data_parallel.h"

#include "engine/layers/batchnorm2d.h"

namespace bareyolo::dist {

std::unique_ptr<Reducer> start_data_parallel(Communicator& comm, ParameterArena& arena,
                                             const std::vector<StateEntry>& state, Graph& graph,
                                             const DataParallelOptions& options) {
  broadcast_state(comm, arena, state);
  if (options.sync_batchnorm) sync_batchnorm(graph, &comm);
  return std::make_unique<Reducer>(
      arena, graph, comm,
      ReducerOptions{.bucket_mb = options.bucket_mb, .bf16_buckets = options.bf16_buckets});
}

void broadcast_buffers(Communicator& comm, const std::vector<StateEntry>& state) {
  std::vector<WorkHandle> work;
  for (const StateEntry& e : state)
    if (!e.trainable()) work.push_back(comm.broadcast(CommBuffer::of(*e.value), 0));
  for (WorkHandle& w : work) w->wait();
}

int sync_batchnorm(Graph& graph, Communicator* comm) {
  int layers = 0;
  for (int node = 0; node < graph.size(); ++node)
    if (Module* module = graph.module(node))
      for_each_module(*module, [&](Module& m) {
        if (auto* bn = dynamic_cast<BatchNorm2d*>(&m)) {
          bn->set_sync(comm);
          ++layers;
        }
      });
  return layers;
}

}  // namespace bareyolo::dist
