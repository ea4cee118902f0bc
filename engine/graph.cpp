// engine/graph.cpp — see graph.h for the execution and zero-copy Concat rules.
#include "engine/graph.h"

#include <stdexcept>

namespace bareyolo {

int Graph::add(std::string name, std::vector<int> inputs, std::unique_ptr<Module> module) {
  const int index = size();
  for (int input : inputs)
    if (input < kGraphInput || input >= index)
      throw std::invalid_argument("graph node " + std::to_string(index) + " (" + name +
                                  ") reads node " + std::to_string(input) +
                                  ", which does not come before it");
  nodes_.push_back({std::move(name), std::move(inputs), std::move(module), {}, {}, {}, -1});
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
    for (int i : node.inputs) in.push_back(i == kGraphInput ? input : result[static_cast<size_t>(i)]);
    if (node.module) {
      result.push_back(node.module->output_shape(in));
      continue;
    }
    Shape4 cat = in.at(0);
    cat.c = 0;
    for (const Shape4& s : in) {
      if (s.n != cat.n || s.h != cat.h || s.w != cat.w)
        throw std::invalid_argument("graph node " + node.name + ": cannot concatenate " +
                                    s.str() + " with " + in[0].str());
      cat.c += s.c;
    }
    result.push_back(cat);
  }
  return result;
}

// Gives each node its output and gradient buffers for this input. Buffers are assigned from
// the last node to the first, so a Concat's buffer exists before its producers take their
// slices of it.
void Graph::plan(const Tensor& input) {
  const std::vector<Shape4> node_shapes = shapes(input.shape());
  for (size_t i = 0; i < nodes_.size(); ++i) nodes_[i].shape = node_shapes[i];
  for (int index = size() - 1; index >= 0; --index) {
    Node& node = nodes_[static_cast<size_t>(index)];
    if (node.concat_consumer == -1) {
      node.output = Tensor::empty(node.shape, input.device(), input.dtype());
      node.grad = Tensor::empty(node.shape, input.device(), input.dtype());
      continue;
    }
    const Node& concat = nodes_[static_cast<size_t>(node.concat_consumer)];
    int64_t channel = 0;  // this producer's first channel in the Concat
    for (int producer : concat.inputs) {
      if (producer == index) break;
      channel += nodes_[static_cast<size_t>(producer)].shape.c;
    }
    node.output = concat.output.channels(channel, channel + node.shape.c);
    node.grad = concat.grad.channels(channel, channel + node.shape.c);
  }
  planned_shape_ = input.shape();
  planned_device_ = input.device();
  planned_dtype_ = input.dtype();
}

std::vector<Tensor> Graph::input_tensors(const Node& node, const Tensor& graph_input) const {
  std::vector<Tensor> tensors;
  for (int i : node.inputs)
    tensors.push_back(i == kGraphInput ? graph_input : nodes_[static_cast<size_t>(i)].output);
  return tensors;
}

const std::vector<Tensor>& Graph::forward(const Tensor& input, Mode mode) {
  if (outputs_.empty()) throw std::logic_error("Graph::forward: no outputs were set");
  if (!(planned_shape_ == input.shape()) || !(planned_device_ == input.device()) ||
      planned_dtype_ != input.dtype())
    plan(input);
  input_ = input;
  for (Node& node : nodes_)
    if (node.module) node.module->forward(input_tensors(node, input), node.output, mode);
  output_tensors_.clear();
  for (int node : outputs_) output_tensors_.push_back(nodes_[static_cast<size_t>(node)].output);
  return output_tensors_;
}

void Graph::backward(const std::vector<Tensor>& grad_outputs,
                     const std::function<void(int node)>& on_node_done) {
  if (grad_outputs.size() != outputs_.size())
    throw std::invalid_argument("Graph::backward: " + std::to_string(grad_outputs.size()) +
                                " output gradients for " + std::to_string(outputs_.size()) +
                                " outputs");
  if (!input_.defined()) throw std::logic_error("Graph::backward before forward");
  for (Node& node : nodes_)
    if (node.concat_consumer == -1) node.grad.zero();  // a slice is zeroed with its Concat
  for (size_t k = 0; k < outputs_.size(); ++k)
    nodes_[static_cast<size_t>(outputs_[k])].grad.copy_from(grad_outputs[k]);

  for (int index = size() - 1; index >= 0; --index) {
    Node& node = nodes_[static_cast<size_t>(index)];
    if (node.module) {
      std::vector<Tensor> grad_inputs;  // undefined for the graph input: no gradient wanted
      for (int i : node.inputs)
        grad_inputs.push_back(i == kGraphInput ? Tensor() : nodes_[static_cast<size_t>(i)].grad);
      node.module->backward(input_tensors(node, input_), node.output, node.grad, grad_inputs);
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

void Graph::release_activations() {
  for (Node& node : nodes_) {
    node.output = node.grad = Tensor();
    if (node.module) node.module->release_activations();
  }
  output_tensors_.clear();
  input_ = Tensor();
  planned_shape_ = {};
}

}  // namespace bareyolo
