// engine/distributed/ddp/reducer.h — the gradient reducer: averages every parameter gradient over
// the ranks while backward is still running (PyTorch DDP's Reducer, in small).
//
// How a gradient travels:
//   1. The gradients already live in one flat arena (engine/parameter_arena.h) in REVERSE
//      registration order — the order backward produces them. Construction cuts the arena's
//      optimised range into buckets of consecutive gradients, each about `bucket_mb` (the first
//      one small, so that communication starts early): a bucket is a range of the arena, so
//      layers accumulate straight into it and no copy is ever made.
//   2. During backward the graph calls node_done(node) when a node's parameter gradients are
//      final. When a bucket's last parameter is final, the bucket is all-reduced
//      asynchronously (ReduceOp::avg; bf16 buckets: sum, see below) — buckets are launched
//      strictly in bucket order, so every rank issues the same collectives in the same order
//      (the communicator contract).
//   3. finish(), before the optimizer, launches what backward left (a bucket holding a
//      parameter that got no gradient this step: its zeros are reduced like any value, so no
//      rank waits for it forever) and waits for every bucket. Each gradient is then the mean
//      of the ranks' gradients.
// Accumulation (`no_sync`): with set_sync(false) node_done and finish do nothing, and the
// gradients add up locally until a step with sync on reduces the sum.
// bf16 buckets (`bf16_buckets`): a bucket's gradients are rounded into a bf16 copy when it
// launches, that copy is summed across ranks (half the bytes on the wire), and finish() writes
// the sum divided by the world size, in f32, back into the f32 arena. The arena itself stays
// f32, so gradients accumulated over micro-batches add up in f32; only what crosses the wire,
// once per optimizer step, is bf16.
//
// Frozen parameters sit after the optimised ones in the arena, outside every bucket.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "engine/distributed/comm/communicator.h"
#include "engine/graph.h"
#include "engine/parameter_arena.h"

namespace bareyolo::dist {

struct ReducerOptions {
  // Capacity of every bucket but the first; 0: sized from the model (auto_bucket_mb).
  double bucket_mb = 25;
  double first_bucket_mb = 1;  // the first bucket (the last layers), so it launches early
  // The buckets travel in bf16 (--grad-dtype bf16; f32 arenas only), else in the arena's dtype.
  bool bf16_buckets = false;
};

// The bucket size for `gradient_bytes` of optimised gradients: about kAutoBuckets buckets,
// each within [0.25 MB, 25 MB]. Why: a bucket leaves only when its last gradient is final, so
// a model cut into PyTorch's fixed 25 MB (yolov5n: one 6 MB bucket after the 1 MB one) sends
// most of its bytes after backward has ended; eight buckets leave while backward still runs,
// and the floor keeps tiny models from paying a collective's latency for a few KB each.
constexpr int kAutoBuckets = 8;
double auto_bucket_mb(int64_t gradient_bytes);

class Reducer {
 public:
  // Buckets over `arena`'s optimised gradients; `graph` (whose modules own them) says which
  // node finalises each.
  Reducer(ParameterArena& arena, const Graph& graph, Communicator& comm,
          ReducerOptions options = {});
  ~Reducer();
  Reducer(const Reducer&) = delete;
  Reducer& operator=(const Reducer&) = delete;

  // The backward hook (Graph::backward's on_node_done).
  void node_done(int node);
  // Launches the buckets backward did not and waits for all: gradients are now averaged.
  void finish();
  // Off: accumulation steps — no communication, gradients add up locally.
  void set_sync(bool enabled);
  // Forgets a step that will not finish: one the Solver recorded as a CUDA graph and whose
  // recording failed midway (its buckets' collectives were recorded, never run, so nothing is
  // waited for). The next step starts afresh.
  void abandon_step() { reset_step(); }
  bool sync() const { return sync_; }

  int bucket_count() const { return int(buckets_.size()); }
  // A bucket's range of the gradient arena, and the slots (ParameterArena::slots()) it holds.
  const Tensor& bucket_buffer(int bucket) const { return buckets_.at(size_t(bucket)).buffer; }
  const std::vector<size_t>& bucket_slots(int bucket) const {
    return buckets_.at(size_t(bucket)).slots;
  }
  // Buckets launched so far in the current step (tests: communication overlaps backward).
  int launched_buckets() const { return next_to_launch_; }

 private:
  struct Bucket {
    Tensor buffer;              // (1, elements, 1, 1): a view of the gradient arena
    Tensor wire;                // its bf16 copy, for bf16 buckets; else undefined
    std::vector<size_t> slots;  // indices into the arena's slots
    int pending = 0;            // slots not final yet in this step
    WorkHandle work;
  };

  void launch_ready_buckets();
  void reset_step();

  const ParameterArena& arena_;
  std::vector<int> bucket_of_slot_;
  std::vector<std::vector<size_t>> slots_of_node_;
  std::vector<Bucket> buckets_;
  Communicator& comm_;
  int next_to_launch_ = 0;
  bool sync_ = true;
};

// Every rank takes rank 0's values: the value arena in one broadcast, then each entry outside
// it (the integer counters), so all ranks start identical.
void broadcast_state(Communicator& comm, ParameterArena& arena,
                     const std::vector<StateEntry>& state);

}  // namespace bareyolo::dist
