// engine/distributed/ddp/data_parallel.cpp — see data_parallel.h.
#include "engine/distributed/ddp/data_parallel.h"

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "engine/algorithm_cache.h"
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
    if (!e.trainable()) work.push_back(comm.broadcast(CommBuffer::of(*e.value), 0, e.name));
  for (WorkHandle& w : work) w->wait();
}

size_t broadcast_convolution_choices(Communicator& comm, const Device& device) {
  // Rank 0's table as the cache file's text (which names its identity), in 8-byte words: its
  // length first, then the words, host buffers on every backend.
  const std::string identity = ops::convolution_choices_identity(device);
  std::string text;
  if (comm.rank() == 0) text = convolution_choices_json(identity, ops::convolution_choices(device));
  int64_t length = int64_t(text.size());
  comm.broadcast(CommBuffer::of(&length, 1), 0, "cudnn choices length")->wait();
  std::vector<int64_t> words(size_t(length + 7) / 8);
  if (!text.empty()) std::memcpy(words.data(), text.data(), text.size());
  comm.broadcast(CommBuffer::of(words.data(), int64_t(words.size())), 0, "cudnn choices")->wait();
  if (comm.rank() == 0) return 0;
  text.assign(reinterpret_cast<const char*>(words.data()), size_t(length));
  const CachedChoices sent = parse_convolution_choices(text, "rank 0's cuDNN choices");
  if (sent.identity != identity) return 0;
  ops::adopt_convolution_choices(device, sent.choices);
  return sent.choices.size();
}

int sync_batchnorm(Graph& graph, Communicator* comm) {
  // A layer's name is its state's ("model.2.cv1.bn"): modules do not know their own, so it
  // comes from the graph's state entries, found by the layer's first tensor.
  std::map<const Tensor*, std::string> name_of;
  for (const StateEntry& e : graph.state()) name_of[e.value] = e.name;
  int layers = 0;
  for (int node = 0; node < graph.size(); ++node)
    if (Module* module = graph.module(node))
      for_each_module(*module, [&](Module& m) {
        if (auto* bn = dynamic_cast<BatchNorm2d*>(&m)) {
          std::vector<StateEntry> own;
          bn->collect_state("", own);  // "weight", ...: the full name less its prefix
          const std::string& full = name_of.at(own.front().value);
          const size_t prefix = full.size() - own.front().name.size();
          bn->set_sync(comm, full.substr(0, prefix > 0 ? prefix - 1 : 0));  // without the '.'
          ++layers;
        }
      });
  return layers;
}

}  // namespace bareyolo::dist
