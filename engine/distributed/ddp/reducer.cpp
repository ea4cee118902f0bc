// engine/distributed/ddp/reducer.cpp — see reducer.h.
#include "engine/distributed/ddp/reducer.h"

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>

#include "engine/trace.h"
#include "kernels/ops.h"

namespace bareyolo::dist {

namespace {

// Which node owns each gradient tensor (a node's module reports its own entries).
std::map<const Tensor*, int> node_of_gradients(const Graph& graph) {
  std::map<const Tensor*, int> node_of;
  for (int node = 0; node < graph.size(); ++node) {
    if (Module* module = graph.module(node)) {
      std::vector<StateEntry> entries;
      module->collect_state("", entries);
      for (const StateEntry& e : entries)
        if (e.trainable()) node_of[e.grad] = node;
    }
  }
  return node_of;
}

}  // namespace

double auto_bucket_mb(int64_t gradient_bytes) {
  return std::clamp(double(gradient_bytes) / kAutoBuckets / 1e6, 0.25, 25.0);
}

Reducer::Reducer(ParameterArena& arena, const Graph& graph, Communicator& comm,
                 ReducerOptions options)
    : arena_(arena), bucket_of_slot_(arena.slots().size(), -1), comm_(comm) {
  const bool bf16_wire = options.bf16_buckets;
  if (bf16_wire && arena.gradients().dtype() != DType::f32)
    throw std::invalid_argument(std::string("Reducer: bf16 buckets carry f32 gradients, not ") +
                                dtype_name(arena.gradients().dtype()));
  const std::map<const Tensor*, int> node_of = node_of_gradients(graph);
  const std::vector<ParameterArena::Slot>& slots = arena.slots();
  const double element_bytes = double(dtype_size(arena.gradients().dtype()));
  const double bucket_mb = options.bucket_mb > 0
                               ? options.bucket_mb
                               : auto_bucket_mb(int64_t(double(arena.optimised()) * element_bytes));
  const double first_bucket_mb = std::min(options.first_bucket_mb, bucket_mb);
  // Consecutive optimised slots (the arena holds them in backward's order) fill a bucket up
  // to its capacity; the first bucket is small.
  int64_t bucket_begin = 0;
  double bucket_bytes = 0;
  std::vector<size_t> bucket;
  auto close_bucket = [&](int64_t end) {
    if (bucket.empty()) return;
    const int index = int(buckets_.size());
    for (size_t slot : bucket) bucket_of_slot_[slot] = index;
    Tensor buffer = arena.gradient_range(bucket_begin, end);
    Tensor wire =
        bf16_wire ? Tensor::empty(buffer.shape(), buffer.device(), DType::bf16) : Tensor();
    buckets_.push_back({buffer, wire, std::move(bucket), 0, nullptr});
    bucket.clear();
    bucket_begin = end, bucket_bytes = 0;
  };
  for (size_t i = 0; i < slots.size(); ++i) {
    const ParameterArena::Slot& slot = slots[i];
    if (!slot.grad || slot.frozen) continue;
    const auto node = node_of.find(slot.grad);
    if (node == node_of.end())
      throw std::invalid_argument("Reducer: no node of the graph owns the gradient of " +
                                  slot.name);
    if (size_t(node->second) >= slots_of_node_.size()) slots_of_node_.resize(node->second + 1);
    slots_of_node_[size_t(node->second)].push_back(i);
    const double capacity = (buckets_.empty() ? first_bucket_mb : bucket_mb) * 1e6;
    const double bytes = double(slot.count) * element_bytes;
    if (bucket_bytes > 0 && bucket_bytes + bytes > capacity) close_bucket(slot.offset);
    bucket.push_back(i);
    bucket_bytes += bytes;
  }
  close_bucket(arena.optimised());
  reset_step();
}

Reducer::~Reducer() {
  // A bucket still in flight is being written by the communicator: let it land.
  for (Bucket& bucket : buckets_) {
    try {
      if (bucket.work) bucket.work->wait();
    } catch (...) {  // a broken communicator already reported its error
    }
  }
}

void Reducer::reset_step() {
  for (Bucket& bucket : buckets_) {
    bucket.pending = int(bucket.slots.size());
    bucket.work.reset();
  }
  next_to_launch_ = 0;
}

void Reducer::node_done(int node) {
  if (!sync_ || node < 0 || size_t(node) >= slots_of_node_.size()) return;
  for (size_t i : slots_of_node_[size_t(node)]) {
    Bucket& bucket = buckets_[size_t(bucket_of_slot_[i])];
    if (bucket.pending == 0)
      throw std::logic_error("Reducer: the gradient of " + arena_.slots()[i].name +
                             " was finalised twice in one step: call finish() after each "
                             "backward, or set_sync(false) for accumulation steps");
    --bucket.pending;
  }
  launch_ready_buckets();
}

// Buckets go out strictly in bucket order, so every rank issues the same collectives in the
// same order even if (in a dynamic graph) its buckets became ready in another order.
void Reducer::launch_ready_buckets() {
  while (next_to_launch_ < bucket_count() && buckets_[size_t(next_to_launch_)].pending == 0) {
    Bucket& bucket = buckets_[size_t(next_to_launch_)];
    const std::string name = "bucket " + std::to_string(next_to_launch_);
    const trace::Label label(name);
    if (bucket.wire.defined()) {
      // Summed on the wire, divided in f32 by finish(): a bf16 average would round the mean
      // once more, and NCCL's scales by 1/N rounded to bf16 (+0.2% at 3 ranks).
      ops::convert_to_bf16(bucket.buffer.view<float>(), bucket.wire.view<bf16>());
      bucket.work = comm_.allreduce(CommBuffer::of(bucket.wire), ReduceOp::sum, name);
    } else {
      bucket.work = comm_.allreduce(CommBuffer::of(bucket.buffer), ReduceOp::avg, name);
    }
    ++next_to_launch_;
  }
}

void Reducer::finish() {
  if (!sync_) return;
  for (Bucket& bucket : buckets_) bucket.pending = 0;  // unused parameters: their zeros
  launch_ready_buckets();
  for (Bucket& bucket : buckets_) {
    bucket.work->wait();
    if (bucket.wire.defined())
      ops::convert_from_bf16(bucket.wire.view<bf16>(), bucket.buffer.view<float>(),
                             float(comm_.world_size()));
  }
  reset_step();
}

void Reducer::set_sync(bool enabled) {
  if (enabled == sync_) return;
  if (next_to_launch_ > 0)
    throw std::logic_error(
        "Reducer::set_sync during a step whose buckets are in flight; "
        "call finish() first");
  sync_ = enabled;
  reset_step();
}

void broadcast_state(Communicator& comm, ParameterArena& arena,
                     const std::vector<StateEntry>& state) {
  std::set<const Tensor*> in_arena;
  for (const ParameterArena::Slot& slot : arena.slots()) in_arena.insert(slot.value);
  std::vector<WorkHandle> work{comm.broadcast(CommBuffer::of(arena.values()), 0, "parameters")};
  for (const StateEntry& e : state)
    if (!in_arena.count(e.value))
      work.push_back(comm.broadcast(CommBuffer::of(*e.value), 0, e.name));
  for (WorkHandle& w : work) w->wait();
}

}  // namespace bareyolo::dist
