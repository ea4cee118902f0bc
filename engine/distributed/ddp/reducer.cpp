// engine/distributed/ddp/reducer.cpp — see reducer.h.
#include "engine/distributed/ddp/reducer.h"

#include <map>
#include <stdexcept>

namespace bareyolo::dist {

Reducer::Reducer(std::vector<Parameter> parameters, Communicator& comm, ReducerOptions options)
    : parameters_(std::move(parameters)), bucket_of_(parameters_.size(), -1), comm_(comm) {
  if (parameters_.empty()) return;
  const DType dtype = parameters_.front().grad->dtype();
  const Device device = parameters_.front().grad->device();
  int max_node = 0;
  for (const Parameter& p : parameters_) {
    if (p.grad->dtype() != dtype || !(p.grad->device() == device))
      throw std::invalid_argument("Reducer: parameter " + p.name + " is " + p.grad->device().str() +
                                  " / another dtype; every gradient "
                                  "must share the first one's device and dtype");
    max_node = std::max(max_node, p.node);
  }
  parameters_of_node_.resize(size_t(max_node) + 1);

  // Assign in reverse registration order: backward finalises the last layers first.
  const double element_bytes = double(dtype_size(dtype));
  std::vector<std::vector<size_t>> groups;
  double group_bytes = 0;
  for (size_t i = parameters_.size(); i-- > 0;) {
    // groups.size() <= 1: the first bucket is being filled.
    const double capacity =
        (groups.size() <= 1 ? options.first_bucket_mb : options.bucket_mb) * 1e6;
    const double bytes = double(parameters_[i].grad->numel()) * element_bytes;
    if (groups.empty() || (group_bytes > 0 && group_bytes + bytes > capacity)) {
      groups.emplace_back();
      group_bytes = 0;
    }
    groups.back().push_back(i);
    group_bytes += bytes;
  }

  // One flat buffer per bucket; each gradient becomes a view of its slice, values kept.
  for (std::vector<size_t>& group : groups) {
    int64_t elements = 0;
    for (size_t i : group) elements += parameters_[i].grad->numel();
    Bucket bucket;
    bucket.buffer = Tensor::zeros({1, elements, 1, 1}, device, dtype);
    int64_t offset = 0;
    for (size_t i : group) {
      Tensor& grad = *parameters_[i].grad;
      const int64_t n = grad.numel();
      Tensor view = bucket.buffer.channels(offset, offset + n).reshape(grad.shape());
      view.copy_from(grad);
      grad = view;
      offset += n;
      bucket_of_[i] = int(buckets_.size());
      parameters_of_node_[size_t(parameters_[i].node)].push_back(i);
    }
    bucket.parameters = std::move(group);
    buckets_.push_back(std::move(bucket));
  }
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
    bucket.pending = int(bucket.parameters.size());
    bucket.work.reset();
  }
  next_to_launch_ = 0;
}

void Reducer::node_done(int node) {
  if (!sync_ || node < 0 || size_t(node) >= parameters_of_node_.size()) return;
  for (size_t i : parameters_of_node_[size_t(node)]) {
    Bucket& bucket = buckets_[size_t(bucket_of_[i])];
    if (bucket.pending == 0)
      throw std::logic_error("Reducer: the gradient of " + parameters_[i].name +
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
    bucket.work = comm_.allreduce(CommBuffer::of(bucket.buffer), ReduceOp::avg);
    ++next_to_launch_;
  }
}

void Reducer::finish() {
  if (!sync_) return;
  for (Bucket& bucket : buckets_) bucket.pending = 0;  // unused parameters: their zeros
  launch_ready_buckets();
  for (Bucket& bucket : buckets_) bucket.work->wait();
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

std::vector<Reducer::Parameter> graph_parameters(
    Graph& graph, const std::function<bool(const StateEntry&)>& include) {
  // Which node owns each gradient tensor (a node's module reports its own entries).
  std::map<const Tensor*, int> node_of;
  for (int node = 0; node < graph.size(); ++node) {
    if (Module* module = graph.module(node)) {
      std::vector<StateEntry> entries;
      module->collect_state("", entries);
      for (const StateEntry& e : entries)
        if (e.trainable()) node_of[e.grad] = node;
    }
  }
  std::vector<Reducer::Parameter> parameters;
  for (const StateEntry& e : graph.state())
    if (e.trainable() && (!include || include(e)))
      parameters.push_back({e.name, e.grad, node_of.at(e.grad)});
  return parameters;
}

void broadcast_state(Communicator& comm, const std::vector<StateEntry>& state) {
  std::vector<WorkHandle> work;
  for (const StateEntry& e : state) work.push_back(comm.broadcast(CommBuffer::of(*e.value), 0));
  for (WorkHandle& w : work) w->wait();
}

}  // namespace bareyolo::dist
