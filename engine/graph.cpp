// engine/graph.cpp — see graph.h for the execution and zero-copy Concat rules.
#include "engine/graph.h"

#include <algorithm>
#include <iterator>
#include <set>
#include <stdexcept>

#include "engine/backward_scratch.h"
#include "engine/tensor_factories.h"
#include "engine/trace.h"

namespace bareyolo {

int Graph::add(std::string name, std::vector<int> inputs, std::unique_ptr<Module> module) {
  const int index = size();
  for (int input : inputs)
    if (input < kGraphInput || input >= index)
      throw std::invalid_argument("graph node " + std::to_string(index) + " (" + name +
                                  ") reads node " + std::to_string(input) +
                                  ", which does not come before it");
  // The trace's name of the node: "model.4." -> "model.4".
  std::string label = !name.empty() && name.back() == '.' ? name.substr(0, name.size() - 1) : name;
  nodes_.push_back(
      {std::move(name), std::move(label), std::move(inputs), std::move(module), {}, {}, {}, -1});
  planned_shape_ = {};  // the plan is stale
  return index;
}

int Graph::add_concat(std::string name, std::vector<int> inputs) {
  const int index = add(std::move(name), inputs, nullptr);
  for (int input : inputs) {
    if (input == kGraphInput)
      throw std::invalid_argument("graph node " + std::to_string(index) +
                                  ": a Concat of the graph input is not supported");
    Node& producer = nodes_[static_cast<size_t>(input)];
    // The producer's output becomes a slice of this Concat's buffer, so it can be in only one.
    if (producer.concat_consumer != -1)
      throw std::invalid_argument("graph node " + std::to_string(input) + " (" + producer.name +
                                  ") feeds two Concat nodes (" +
                                  std::to_string(producer.concat_consumer) + " and " +
                                  std::to_string(index) + "); only one is supported");
    producer.concat_consumer = index;
  }
  return index;
}

void Graph::set_outputs(std::vector<int> nodes) {
  for (int node : nodes)
    if (node < 0 || node >= size())
      throw std::invalid_argument("graph output " + std::to_string(node) + " is not a node");
  outputs_ = std::move(nodes);
}

std::vector<Shape4> Graph::shapes(const Shape4& input) const {
  std::vector<Shape4> result;
  for (const Node& node : nodes_) {
    std::vector<Shape4> in;
    for (int i : node.inputs)
      in.push_back(i == kGraphInput ? input : result[static_cast<size_t>(i)]);
    if (node.module) {
      result.push_back(node.module->output_shape(in));
      continue;
    }
    Shape4 cat = in.at(0);
    cat.c = 0;
    for (const Shape4& s : in) {
      if (s.n != cat.n || s.h != cat.h || s.w != cat.w)
        throw std::invalid_argument("graph node " + node.name + ": cannot concatenate " + s.str() +
                                    " with " + in[0].str());
      cat.c += s.c;
    }
    result.push_back(cat);
  }
  return result;
}

void Graph::plan(const Tensor& input, DType activations, Mode mode) {
  const std::vector<Shape4> node_shapes = shapes(input.shape());
  for (size_t i = 0; i < nodes_.size(); ++i) nodes_[i].shape = node_shapes[i];
  activation_buffers_.clear();
  gradient_buffers_.clear();  // an evaluation plan has none: free the training plan's
  if (mode == Mode::train || keep_all_outputs_)
    plan_training(input.device(), activations);
  else
    plan_evaluation(input.device(), activations);
  planned_shape_ = input.shape();
  planned_device_ = input.device();
  planned_dtype_ = activations;
  planned_mode_ = mode;
}

// The node whose buffer holds `node`'s output: itself, or the Concat (of a Concat ...) that
// its output is a slice of.
int Graph::storage_owner(int node) const {
  while (nodes_[size_t(node)].concat_consumer != -1) node = nodes_[size_t(node)].concat_consumer;
  return node;
}

namespace {

// Buffers shared by tenants over live ranges [start, end] on one time axis (forward order for
// the evaluation plan's outputs, backward order for the training plan's gradients): tenants,
// asked for in order of their start, take the smallest buffer big enough whose previous
// tenant ended before they start, else a new one.
class SharedBuffers {
 public:
  SharedBuffers(Device device, DType dtype) : device_(device), dtype_(dtype) {}

  // A flat buffer of at least `elements`, this tenant's until `end`.
  Tensor take(int64_t elements, int start, int end) {
    Buffer* best = nullptr;
    for (Buffer& b : buffers_)
      if (b.end < start && b.storage.numel() >= elements &&
          (!best || b.storage.numel() < best->storage.numel()))
        best = &b;
    if (!best) {
      buffers_.push_back({Tensor::empty({1, 1, 1, elements}, device_, dtype_), end});
      best = &buffers_.back();
    }
    best->end = end;
    return best->storage;
  }
  std::vector<Tensor> storages() const {
    std::vector<Tensor> all;
    for (const Buffer& b : buffers_) all.push_back(b.storage);
    return all;
  }

 private:
  struct Buffer {
    Tensor storage;
    int end;  // when its current tenant's last reader runs
  };
  Device device_;
  DType dtype_;
  std::vector<Buffer> buffers_;
};

}  // namespace

// The storage owners' live ranges on forward's time axis (node index: from the first node
// whose output lies in the owner to the last node reading any of it, a graph output's to
// size()) or backward's (size() - index: from the backward of that last reader, which adds the
// first contribution to the gradient, to the backward of that first node, which reads it last).
// An owner nobody reads lives at its own node. In order of their start.
std::vector<Graph::Tenancy> Graph::tenancies(bool backward) const {
  const int n = size();
  std::vector<int> first_node(size_t(n), n), last_reader(size_t(n), -1);
  for (int index = 0; index < n; ++index) {
    int& first = first_node[size_t(storage_owner(index))];
    first = std::min(first, index);
    for (int input : nodes_[size_t(index)].inputs)
      if (input != kGraphInput) {
        int& last = last_reader[size_t(storage_owner(input))];
        last = std::max(last, index);
      }
  }
  for (int output : outputs_) last_reader[size_t(storage_owner(output))] = n;
  std::vector<Tenancy> all;
  for (int owner = 0; owner < n; ++owner) {
    if (nodes_[size_t(owner)].concat_consumer != -1) continue;
    const int first = first_node[size_t(owner)];
    const int last = std::max(last_reader[size_t(owner)], first);
    all.push_back(backward ? Tenancy{owner, n - last, n - first} : Tenancy{owner, first, last});
  }
  std::stable_sort(all.begin(), all.end(),
                   [](const Tenancy& a, const Tenancy& b) { return a.start < b.start; });
  return all;
}

// Producers of Concats take their channels of the Concat's buffers (the gradient's too when
// `gradients`), after the Concat's earlier inputs. From the last node to the first, so that a
// Concat that feeds another Concat has its slice before its own producers take theirs.
void Graph::place_concat_producers(bool gradients) {
  for (int index = size() - 1; index >= 0; --index) {
    Node& node = nodes_[size_t(index)];
    if (node.concat_consumer == -1) continue;
    const Node& concat = nodes_[size_t(node.concat_consumer)];
    int64_t channel = 0;
    for (int input : concat.inputs) {
      if (input == index) break;
      channel += nodes_[size_t(input)].shape.c;
    }
    node.output = concat.output.channels(channel, channel + node.shape.c);
    node.grad = gradients ? concat.grad.channels(channel, channel + node.shape.c) : Tensor();
  }
}

// Training: every storage owner keeps its own output buffer (backward reads each node's
// inputs). Gradients share buffers: an owner's gradient is live during backward only, from
// the backward of the last node reading any part of it (which adds the first contribution;
// a graph output's from the start) down to the backward of the first node it holds (the last
// to read it). Owners share SharedBuffers on backward's time axis, each zeroed just before its
// first write (zero_before_).
void Graph::plan_training(Device device, DType activations) {
  const int n = size();
  zero_before_.assign(size_t(n) + 1, {});
  SharedBuffers gradients(device, activations);
  for (const Tenancy& t : tenancies(/*backward=*/true)) {
    Node& node = nodes_[size_t(t.owner)];
    node.output = Tensor::empty(node.shape, device, activations, layout_);
    activation_buffers_.push_back(node.output);
    node.grad = gradients.take(node.shape.numel(), t.start, t.end).prefix(node.shape, layout_);
    zero_before_[size_t(n - t.start)].push_back(t.owner);  // before its first write
  }
  gradient_buffers_ = gradients.storages();
  place_concat_producers(/*gradients=*/true);
  write_first_gradients();
}

// Backward ops add into gradients (kernels/ops.h), so an owner's gradient is zeroed before its
// first writer runs; but where that writer produces the whole of it, the writer may write
// instead and no zeroing pass runs (nor, on a GPU, a read of the old values). A node's backward
// writes when it is the first to reach every input gradient it produces and each is the whole
// of its owner's (not a slice of a Concat's); its owners then leave zero_before_. The graph
// outputs' gradients are written whole by backward's first copy.
void Graph::write_first_gradients() {
  const int n = size();
  // zero_before_ lists owners: an input found there is its own owner, a whole buffer.
  auto first_reached_here = [&](int index, int input) {
    const std::vector<int>& zeroed = zero_before_[size_t(index)];
    return std::find(zeroed.begin(), zeroed.end(), input) != zeroed.end();
  };
  backward_write_.assign(size_t(n), ops::GradientWrite::add);
  for (int index = 0; index < n; ++index) {
    const std::vector<int>& inputs = nodes_[size_t(index)].inputs;
    std::vector<int> gradients;  // the inputs that have one
    std::copy_if(inputs.begin(), inputs.end(), std::back_inserter(gradients),
                 [](int input) { return input != kGraphInput; });
    const bool distinct =
        std::set<int>(gradients.begin(), gradients.end()).size() == gradients.size();
    if (!nodes_[size_t(index)].module || gradients.empty() || !distinct ||
        !std::all_of(gradients.begin(), gradients.end(),
                     [&](int input) { return first_reached_here(index, input); }))
      continue;
    backward_write_[size_t(index)] = ops::GradientWrite::overwrite;
    std::erase_if(zero_before_[size_t(index)], [&](int owner) {
      return std::find(gradients.begin(), gradients.end(), owner) != gradients.end();
    });
  }
  std::erase_if(zero_before_[size_t(n)], [&](int owner) {
    return std::count(outputs_.begin(), outputs_.end(), owner) == 1;
  });
}

// Evaluation: each storage owner (a node or a Concat buffer) is live from the first node that
// writes into it to the last node that reads any part of it (graph outputs: to the end), and
// owners share SharedBuffers on forward's time axis.
void Graph::plan_evaluation(Device device, DType activations) {
  SharedBuffers outputs(device, activations);
  for (const Tenancy& t : tenancies(/*backward=*/false)) {
    Node& node = nodes_[size_t(t.owner)];
    node.output = outputs.take(node.shape.numel(), t.start, t.end).prefix(node.shape, layout_);
    node.grad = Tensor();  // no backward after an evaluation forward
  }
  place_concat_producers(/*gradients=*/false);
  activation_buffers_ = outputs.storages();
}

static int64_t elements_in(const std::vector<Tensor>& buffers) {
  int64_t total = 0;
  for (const Tensor& t : buffers) total += t.numel();
  return total;
}

int64_t Graph::planned_activation_elements() const { return elements_in(activation_buffers_); }
int64_t Graph::planned_gradient_elements() const { return elements_in(gradient_buffers_); }

std::vector<Tensor> Graph::planned_buffers() const {
  std::vector<Tensor> buffers = activation_buffers_;
  buffers.insert(buffers.end(), gradient_buffers_.begin(), gradient_buffers_.end());
  return buffers;
}

std::vector<Tensor> Graph::input_tensors(const Node& node, const Tensor& graph_input) const {
  std::vector<Tensor> tensors;
  for (int i : node.inputs)
    tensors.push_back(i == kGraphInput ? graph_input : nodes_[static_cast<size_t>(i)].output);
  return tensors;
}

DType Graph::activation_dtype(const Tensor& input) const {
  if (!mixed_precision_) return input.dtype();
  if (input.dtype() != DType::f32)
    throw std::invalid_argument(std::string("Graph: mixed precision takes a float input, not ") +
                                dtype_name(input.dtype()));
  return DType::bf16;
}

const std::vector<Tensor>& Graph::forward(const Tensor& input, Mode mode) {
  if (outputs_.empty()) throw std::logic_error("Graph::forward: no outputs were set");
  const DType activations = activation_dtype(input);
  if (!(planned_shape_ == input.shape()) || !(planned_device_ == input.device()) ||
      planned_dtype_ != activations || planned_mode_ != mode)
    plan(input, activations, mode);
  // Whether the input and outputs cross between the caller's dtype and layout and the graph's.
  const bool converts_at_edges = activations != input.dtype() || layout_ != Layout::nchw;
  input_ = input;
  if (converts_at_edges) {  // into the graph's own buffer: the caller's stays as it is
    ensure_tensor(own_input_, input.shape(), input.device(), activations, layout_);
    own_input_.convert_from(input);
    input_ = own_input_;
  }
  for (Node& node : nodes_) {
    if (!node.module) continue;
    const trace::Range traced(trace::Track::compute, "forward", node.label);
    node.module->forward(input_tensors(node, input_), node.output, mode);
  }
  output_tensors_.clear();
  caller_outputs_.resize(outputs_.size());
  for (size_t k = 0; k < outputs_.size(); ++k) {
    const Tensor& output = nodes_[static_cast<size_t>(outputs_[k])].output;
    if (!converts_at_edges) {
      output_tensors_.push_back(output);
      continue;
    }
    // The input's dtype, device and layout (NCHW).
    ensure_tensor(caller_outputs_[k], output.shape(), input.device(), input.dtype());
    caller_outputs_[k].convert_from(output);
    output_tensors_.push_back(caller_outputs_[k]);
  }
  return output_tensors_;
}

void Graph::backward(const std::vector<Tensor>& grad_outputs,
                     const std::function<void(int node)>& on_node_done) {
  if (grad_outputs.size() != outputs_.size())
    throw std::invalid_argument("Graph::backward: " + std::to_string(grad_outputs.size()) +
                                " output gradients for " + std::to_string(outputs_.size()) +
                                " outputs");
  if (!input_.defined()) throw std::logic_error("Graph::backward before forward");
  if (planned_mode_ != Mode::train && !keep_all_outputs_)
    throw std::logic_error(
        "Graph::backward after an evaluation forward: run forward in "
        "Mode::train first");
  for (int owner : zero_before_[size_t(size())]) nodes_[size_t(owner)].grad.zero();
  // Rounded to bf16 under mixed precision, laid out channels last under channels last.
  for (size_t k = 0; k < outputs_.size(); ++k)
    nodes_[static_cast<size_t>(outputs_[k])].grad.convert_from(grad_outputs[k]);

  for (int index = size() - 1; index >= 0; --index) {
    Node& node = nodes_[static_cast<size_t>(index)];
    // The gradients this node's backward is the first to add into (a slice is zeroed with its
    // Concat).
    for (int owner : zero_before_[size_t(index)]) nodes_[size_t(owner)].grad.zero();
    if (node.module) {
      const trace::Range traced(trace::Track::compute, "backward", node.label);
      std::vector<Tensor> grad_inputs;  // undefined for the graph input: no gradient wanted
      for (int i : node.inputs)
        grad_inputs.push_back(i == kGraphInput ? Tensor() : nodes_[static_cast<size_t>(i)].grad);
      node.module->backward(input_tensors(node, input_), node.output, node.grad, grad_inputs,
                            backward_write_[size_t(index)]);
    }
    if (on_node_done) on_node_done(index);
  }
}

std::vector<StateEntry> Graph::state() {
  std::vector<StateEntry> entries;
  for (Node& node : nodes_)
    if (node.module) node.module->collect_state(node.name, entries);
  return entries;
}

void Graph::set_mixed_precision(bool on) {
  if (on == mixed_precision_) return;
  mixed_precision_ = on;  // the next forward plans for its activations' dtype
  own_input_ = Tensor();
  ++activations_generation_;
}

void Graph::set_channels_last(bool on) {
  const Layout layout = on ? Layout::channels_last : Layout::nchw;
  if (layout == layout_) return;
  layout_ = layout;
  planned_shape_ = {};  // the next forward plans its buffers in the new layout
  own_input_ = Tensor();
  ++activations_generation_;
}

void Graph::release_activations() {
  for (Node& node : nodes_) {
    node.output = node.grad = Tensor();
    if (node.module) node.module->release_activations();
  }
  output_tensors_.clear();
  caller_outputs_.clear();
  activation_buffers_.clear();
  gradient_buffers_.clear();
  input_ = own_input_ = Tensor();
  release_backward_scratch();
  planned_shape_ = {};
  ++activations_generation_;
}

}  // namespace bareyolo
