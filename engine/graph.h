// engine/graph.h — Graph: a static DAG of modules, run forward in insertion order and
// backward in reverse (Caffe's Net).
//
// Node i reads the outputs of earlier nodes (or the graph input, index kGraphInput) and
// writes one output. A Concat node computes nothing: when its output shape is known, each of
// its producers is given a channel slice of the Concat's buffer as its own output, and the
// same for the gradients. So a Concat costs no copy forward and no work backward — its
// consumers' backward adds into the slices, which ARE the producers' gradients.
//
// Memory: in training every output is kept (backward reads each node's inputs), and the
// gradients share a few buffers: a node's gradient lives from the backward of its last reader
// to its own backward. In evaluation an output is kept only until its last reader has run:
// outputs share a few buffers. Both are a greedy plan over live ranges, each buffer reused once
// its previous tenant is dead.
//
// Backward accumulates: a gradient buffer is zeroed just before the first backward that adds
// into it, each node adds into its inputs' gradients. When node i's backward returns, the gradients
// of its parameters are final (a parameter belongs to one node), and the graph says so through the
// callback: the distributed reducer starts all-reducing them while the rest of backward runs.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/module.h"

namespace bareyolo {

class Graph {
 public:
  static constexpr int kGraphInput = -1;

  // Appends a node computed by `module` from `inputs`; returns its index. `name` prefixes its
  // state entries ("model.4.").
  int add(std::string name, std::vector<int> inputs, std::unique_ptr<Module> module);
  // Appends a channel concatenation of `inputs`, in order.
  int add_concat(std::string name, std::vector<int> inputs);
  void set_outputs(std::vector<int> nodes);

  // Runs every node on `input`; returns the output nodes' tensors (valid until the next call),
  // in the input's dtype. Buffers are planned for the input's shape, dtype, device and mode, and
  // reused while those stay the same. After Mode::eval only the output nodes' tensors are
  // meaningful.
  const std::vector<Tensor>& forward(const Tensor& input, Mode mode);
  // After forward(Mode::train): given dL/d(outputs) (in the input's dtype), computes every
  // parameter gradient (added into the parameters' gradient tensors). on_node_done(i) runs after
  // node i's backward.
  void backward(const std::vector<Tensor>& grad_outputs,
                const std::function<void(int node)>& on_node_done = {});

  // The output shape of every node for an input of `input` shape, computing nothing.
  std::vector<Shape4> shapes(const Shape4& input) const;
  // Every node's state entries in node order, names prefixed with the node's name.
  std::vector<StateEntry> state();
  int size() const { return static_cast<int>(nodes_.size()); }
  Module* module(int node) const { return nodes_.at(static_cast<size_t>(node)).module.get(); }
  const std::string& name(int node) const { return nodes_.at(static_cast<size_t>(node)).name; }
  const Tensor& output_of(int node) const { return nodes_.at(static_cast<size_t>(node)).output; }
  // Drops every activation and gradient buffer (before evaluation at another size, say).
  void release_activations();
  // Changes whenever memory the forward and backward write may have been given back: at
  // release_activations and at a change of precision or layout (the next forward plans anew).
  // A CUDA graph recorded before the change would replay into memory that is gone.
  uint64_t activations_generation() const { return activations_generation_; }
  // Elements held by the planned activation buffers (the outputs) and, in training, gradient
  // buffers (for tests of the plans).
  int64_t planned_activation_elements() const;
  int64_t planned_gradient_elements() const;
  // The current plan's buffers (outputs, and in training the gradients): a CUDA graph of a
  // forward or backward holds them, since it reads and writes them at every replay though the
  // graph may plan other buffers later (another input size).
  std::vector<Tensor> planned_buffers() const;
  // Mixed precision (docs/mixed_precision.md): a float input is rounded into a bf16 copy, and
  // every activation and activation gradient from there on is a bf16 tensor — the nodes' outputs
  // and gradients, what the modules keep between forward and backward. The modules compute in
  // float and keep float parameters, statistics and parameter gradients (kernels/ops.h). The
  // outputs are widened to float for the caller (the loss), and the loss's gradient is rounded
  // to bf16 on the way in.
  void set_mixed_precision(bool on);
  bool mixed_precision() const { return mixed_precision_; }
  // Channels last (kernels/view.h): the input is copied into a channels-last buffer, and every
  // activation and activation gradient from there on is channels last (a module's intermediates
  // follow its input's layout); the outputs reach the caller in NCHW, the loss's gradient is laid
  // out channels last on the way in. The same numbers as NCHW: layout is only where they lie.
  void set_channels_last(bool on);
  // Keep every output in evaluation too (the training plan): for debugging a node's output,
  // and as the reference the shared-buffer evaluation plan is tested against.
  void keep_all_outputs(bool keep) {
    keep_all_outputs_ = keep;
    planned_shape_ = {};
  }

 private:
  struct Node {
    std::string name;
    std::string label;  // the name without its trailing dot: the trace's ("forward model.4")
    std::vector<int> inputs;
    std::unique_ptr<Module> module;  // null for a Concat
    Shape4 shape;
    Tensor output, grad;       // slices of the consuming Concat's buffers, if any
    int concat_consumer = -1;  // the Concat node this node's output lives in
  };

  // The dtype the activations of a forward on `input` are stored in.
  DType activation_dtype(const Tensor& input) const;
  void plan(const Tensor& input, DType activations, Mode mode);
  void plan_training(Device device, DType activations);
  void plan_evaluation(Device device, DType activations);
  void place_concat_producers(bool gradients);
  int storage_owner(int node) const;
  // A storage owner's live range [start, end] on a plan's time axis (graph.cpp).
  struct Tenancy {
    int owner, start, end;
  };
  std::vector<Tenancy> tenancies(bool backward) const;
  std::vector<Tensor> input_tensors(const Node& node, const Tensor& graph_input) const;

  std::vector<Node> nodes_;
  std::vector<int> outputs_;
  std::vector<Tensor> output_tensors_;
  // The outputs in the caller's dtype and NCHW (mixed precision, channels last).
  std::vector<Tensor> caller_outputs_;
  Tensor input_;      // the last forward's input, as the first node read it (for backward)
  Tensor own_input_;  // the input in the graph's dtype and layout, reused every forward
  Shape4 planned_shape_;
  Device planned_device_;
  DType planned_dtype_ = DType::f32;  // of the activations
  Mode planned_mode_ = Mode::train;
  bool keep_all_outputs_ = false;
  bool mixed_precision_ = false;
  Layout layout_ = Layout::nchw;  // of the activations and their gradients
  uint64_t activations_generation_ = 0;
  std::vector<Tensor> activation_buffers_;  // the distinct buffers of the current plan
  std::vector<Tensor> gradient_buffers_;    // training: the buffers the gradients share
  // Training: zero_before_[i] lists the owners whose gradient is zeroed just before node i's
  // backward; zero_before_[size()] those zeroed before it starts (the graph outputs'). An owner
  // whose first writer writes it whole is never zeroed: that writer's backward_write_ is
  // overwrite (write_first_gradients).
  std::vector<std::vector<int>> zero_before_;
  std::vector<ops::GradientWrite> backward_write_;
  void write_first_gradients();
};

}  // namespace bareyolo
