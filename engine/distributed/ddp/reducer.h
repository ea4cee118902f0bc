// engine/distributed/ddp/reducer.h — the gradient reducer: averages every parameter gradient over
// the ranks while backward is still running (PyTorch DDP's Reducer, in small).
//
// How a gradient travels:
//   1. Construction assigns the parameters to buckets in REVERSE registration order — the
//      order backward produces them — each bucket one flat buffer of about `bucket_mb` (the
//      first one small, so that communication starts early). Every parameter's gradient
//      tensor is re-pointed to a view of its bucket: layers accumulate straight into the
//      bucket, and no copy is ever made.
//   2. During backward the graph calls node_done(node) when a node's parameter gradients are
//      final. When a bucket's last parameter is final, the bucket is all-reduced
//      asynchronously (ReduceOp::avg) — buckets are launched strictly in bucket order, so
//      every rank issues the same collectives in the same order (the communicator contract).
//   3. finish(), before the optimizer, launches what backward left (a bucket holding a
//      parameter that got no gradient this step: its zeros are reduced like any value, so no
//      rank waits for it forever) and waits for every bucket. Each gradient is then the mean
//      of the ranks' gradients.
// Accumulation (`no_sync`): with set_sync(false) node_done and finish do nothing, and the
// gradients add up locally until a step with sync on reduces the sum.
//
// Frozen parameters are simply not given to the reducer.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "engine/distributed/comm/communicator.h"
#include "engine/graph.h"

namespace bareyolo::dist {

struct ReducerOptions {
  double bucket_mb = 25;       // capacity of every bucket but the first
  double first_bucket_mb = 1;  // the first bucket (the last layers), so it launches early
};

class Reducer {
 public:
  struct Parameter {
    std::string name;
    Tensor* grad = nullptr;  // re-pointed into a bucket by the constructor (values kept)
    int node = 0;            // node_done(node) says this gradient is final
  };

  // `parameters` in registration order; all of one dtype and device.
  Reducer(std::vector<Parameter> parameters, Communicator& comm, ReducerOptions options = {});
  ~Reducer();
  Reducer(const Reducer&) = delete;
  Reducer& operator=(const Reducer&) = delete;

  // The backward hook (Graph::backward's on_node_done).
  void node_done(int node);
  // Launches the buckets backward did not and waits for all: gradients are now averaged.
  void finish();
  // Off: accumulation steps — no communication, gradients add up locally.
  void set_sync(bool enabled);
  bool sync() const { return sync_; }

  int bucket_count() const { return int(buckets_.size()); }
  const Tensor& bucket_buffer(int bucket) const { return buckets_.at(size_t(bucket)).buffer; }
  int bucket_of(size_t parameter) const { return bucket_of_.at(parameter); }
  // Buckets launched so far in the current step (tests: communication overlaps backward).
  int launched_buckets() const { return next_to_launch_; }

 private:
  struct Bucket {
    Tensor buffer;                   // (1, elements, 1, 1)
    std::vector<size_t> parameters;  // indices into parameters_
    int pending = 0;                 // parameters not final yet in this step
    WorkHandle work;
  };

  void launch_ready_buckets();
  void reset_step();

  std::vector<Parameter> parameters_;
  std::vector<int> bucket_of_;
  std::vector<std::vector<size_t>> parameters_of_node_;
  std::vector<Bucket> buckets_;
  Communicator& comm_;
  int next_to_launch_ = 0;
  bool sync_ = true;
};

// The trainable parameters of `graph` in registration order, each with the node that
// finalises its gradient; `include` filters them (frozen parameters are left out).
std::vector<Reducer::Parameter> graph_parameters(
    Graph& graph, const std::function<bool(const StateEntry&)>& include = {});

// Every parameter and buffer of `state` takes rank 0's value, so all ranks start identical.
void broadcast_state(Communicator& comm, const std::vector<StateEntry>& state);

}  // namespace bareyolo::dist
