// engine/module.h — Module: the unit a graph is built from (Caffe's Layer).
//
// A module computes one output tensor from its input tensors (forward) and, given the
// gradient of the loss with respect to that output, ADDS the gradients with respect to its
// inputs and its parameters (backward; the accumulate convention of kernels/ops.h). It keeps
// whatever it needs between the two calls (a conv keeps its pre-activation). Composite modules
// (YOLOv5's C3, SPPF) are modules made of modules.
//
// Outputs are written into tensors the caller provides, which may be channel slices of a
// larger tensor: that is how a Concat costs nothing (engine/graph.h). A module stores its
// activations (outputs, kept intermediates, gradients) in its input's dtype: the parameters'
// dtype, or bf16 under mixed precision (Graph::set_mixed_precision), computing in float then.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <vector>

#include "engine/tensor.h"
#include "kernels/ops.h"  // ops::GradientWrite

namespace bareyolo {

// How an optimizer treats a parameter: YOLOv5's three groups.
enum class ParamGroup { weight, norm_weight, bias };  // weight decay only on `weight`

// A group's index in YOLOv5's optimizer order (SGD and AdamW alike): 0 biases, 1 weights,
// 2 normalisation weights.
inline int optimizer_group_index(ParamGroup group) {
  return group == ParamGroup::bias ? 0 : group == ParamGroup::weight ? 1 : 2;
}

// A module's bf16 copy of a float parameter, the operand of its mixed-precision kernels
// (Conv2d's weight). The module rounds the parameter into it at every bf16 forward, unless
// `kept`: then its owner writes the copy wherever the parameter changes (the parameter arena,
// refreshed once per optimizer step by the Solver), and the forward reads it as it is.
struct Bf16Copy {
  Tensor tensor;
  bool kept = false;
};

// One entry of a module's state, named as in YOLOv5's state_dict ("conv.weight",
// "bn.running_mean", ...). `value` and `grad` point at the module's own tensors, which the
// gradient reducer re-points into its bucket buffers (engine/distributed/ddp/reducer.h).
// `dims` is the entry's shape as saved: Shape4 storage pads a [c2] vector to (1, c2, 1, 1),
// a scalar to (1, 1, 1, 1).
struct StateEntry {
  std::string name;
  Tensor* value = nullptr;
  Tensor* grad = nullptr;  // null for buffers (running statistics, counters, anchors)
  std::vector<int64_t> dims;
  ParamGroup group = ParamGroup::weight;
  Bf16Copy* bf16 = nullptr;  // the module's bf16 copy of the value, if it has one

  bool trainable() const { return grad != nullptr; }
};

enum class Mode { train, eval };

class Module {
 public:
  virtual ~Module() = default;

  // The output shape for these input shapes; throws std::invalid_argument when they do not fit.
  virtual Shape4 output_shape(std::span<const Shape4> inputs) const = 0;
  // Writes the output (shape output_shape(...)) from the inputs.
  virtual void forward(std::span<const Tensor> inputs, Tensor& output, Mode mode) = 0;
  // After forward in Mode::train on the same tensors: grad_inputs[i] += dL/d inputs[i], or with
  // `overwrite` grad_inputs[i] = dL/d inputs[i] whatever they held (the caller knows this is
  // their first and whole contribution, and spares the zeroing: Graph::backward);
  // parameter gradients += dL/d parameter.
  virtual void backward(std::span<const Tensor> inputs, const Tensor& output,
                        const Tensor& grad_output, std::span<Tensor> grad_inputs,
                        ops::GradientWrite write) = 0;
  // Appends this module's state entries, their names prefixed with `prefix`.
  virtual void collect_state(const std::string& prefix, std::vector<StateEntry>& state) {
    (void)prefix;
    (void)state;
  }
  // Releases tensors kept between forward and backward (memory between steps, or before eval).
  virtual void release_activations() {}
  // Calls visit(child) for each module this one is made of (not recursively); a leaf has none.
  virtual void for_each_child(const std::function<void(Module&)>& visit) { (void)visit; }
};

// Calls visit on `root` and, depth first, on every module inside it. (Not named `module`:
// nvcc warns that it parses the C++20 keyword as an identifier there.)
inline void for_each_module(Module& root, const std::function<void(Module&)>& visit) {
  visit(root);
  root.for_each_child([&](Module& child) { for_each_module(child, visit); });
}

}  // namespace bareyolo
