// tests/unit/module_check.h — GradCheck for a whole Module: the module is built in double
// precision, and its backward is checked against finite differences with respect to every
// trainable parameter (its state entries with a gradient) and, unless `input_gradients` is
// false (a module that computes none, like a whole network), every input. And its backward told
// to overwrite against the same backward adding (check_overwrite_matches_add).
#pragma once

#include <array>
#include <cmath>
#include <span>

#include "engine/module.h"
#include "kernels/ops.h"
#include "tests/support/testing.h"

namespace bareyolo::testing {

// YOLOv5's BatchNorm settings, which the model builds its layers with.
inline constexpr ops::BatchNormParams kYolov5Bn{.eps = 1e-3, .momentum = 0.03};

inline void check_module_gradients(Module& module, const std::vector<Shape4>& input_shapes,
                                   Mode mode, Rng& rng, bool input_gradients = true,
                                   int max_checks_per_input = 60) {
  std::vector<StateEntry> state;
  module.collect_state("", state);
  std::vector<StateEntry> params;
  for (const StateEntry& e : state)
    if (e.trainable()) params.push_back(e);

  // Every quantity the check varies, as plain vectors: inputs first, then parameters.
  std::vector<std::vector<double>> values;
  std::vector<std::string> names;
  for (size_t i = 0; i < input_shapes.size(); ++i) {
    values.push_back(random_vector(rng, input_shapes[i].numel()));
    names.push_back("input " + std::to_string(i));
  }
  for (const StateEntry& p : params) {
    // Perturb parameters away from their initial values (gamma = 1, beta = 0 hide bugs).
    std::vector<double> v = p.value->to_doubles();
    for (double& x : v) x += std::uniform_real_distribution<double>(-0.5, 0.5)(rng);
    values.push_back(v);
    names.push_back(p.name);
  }
  const size_t n_inputs = input_shapes.size();

  std::vector<Tensor> inputs(n_inputs);
  Tensor output;
  auto run_forward = [&] {
    for (size_t i = 0; i < n_inputs; ++i)
      inputs[i] = Tensor::from_vector(values[i], input_shapes[i]);
    for (size_t k = 0; k < params.size(); ++k)
      params[k].value->copy_from(
          Tensor::from_vector(values[n_inputs + k], params[k].value->shape()));
    std::vector<Shape4> shapes = input_shapes;
    output = Tensor::empty(module.output_shape(shapes), Device::cpu(), DType::f64);
    module.forward(inputs, output, mode);
    return output.to_vector<double>();
  };

  GradCheck check;
  for (size_t k = input_gradients ? 0 : n_inputs; k < values.size(); ++k) {
    check.inputs.push_back(&values[k]);
    check.names.push_back(names[k]);
  }
  check.max_checks_per_input = max_checks_per_input;
  check.forward = run_forward;
  const size_t first_checked = input_gradients ? 0 : n_inputs;
  check.backward = [&](const std::vector<double>& dout, std::vector<std::vector<double>>& checked) {
    // All gradients, unchecked inputs' included; `checked` holds the tail that is checked.
    std::vector<std::vector<double>> d(first_checked);
    for (size_t i = 0; i < first_checked; ++i) d[i].assign(values[i].size(), 0.0);
    d.insert(d.end(), checked.begin(), checked.end());
    run_forward();
    std::vector<Tensor> grad_inputs;
    for (size_t i = 0; i < n_inputs; ++i)
      grad_inputs.push_back(Tensor::from_vector(d[i], input_shapes[i]));
    for (size_t k = 0; k < params.size(); ++k)
      params[k].grad->copy_from(Tensor::from_vector(d[n_inputs + k], params[k].grad->shape()));
    module.backward(inputs, output, Tensor::from_vector(dout, output.shape()), grad_inputs,
                    ops::GradientWrite::add);
    for (size_t i = 0; i < n_inputs; ++i) d[i] = grad_inputs[i].to_vector<double>();
    for (size_t k = 0; k < params.size(); ++k)
      d[n_inputs + k] = params[k].grad->to_vector<double>();
    checked.assign(d.begin() + static_cast<std::ptrdiff_t>(first_checked), d.end());
  };
  check.run(rng);
}

// A backward told GradientWrite::overwrite leaves in the input gradient what the same backward
// with add leaves in a zeroed one, whatever it held before (NaN here: a value it fails to write
// fails the check), and the same parameter gradients. Compared with ==: a -0 written where 0 + -0
// gave +0 is the same gradient. The module is built in double; one input of `input_shape`.
inline void check_overwrite_matches_add(Module& module, Shape4 input_shape, Mode mode, Rng& rng) {
  std::vector<StateEntry> state;
  module.collect_state("", state);
  const Tensor input = Tensor::from_vector(random_vector(rng, input_shape.numel()), input_shape);
  const Shape4 output_shape = module.output_shape(std::array{input_shape});
  const Tensor grad_output =
      Tensor::from_vector(random_vector(rng, output_shape.numel()), output_shape);
  auto gradients = [&](ops::GradientWrite write, double before) {
    for (const StateEntry& e : state)
      if (e.trainable()) e.grad->zero();
    Tensor output = Tensor::empty(output_shape, Device::cpu(), DType::f64);
    module.forward(std::span(&input, 1), output, mode);
    Tensor grad_input =
        Tensor::from_vector(std::vector<double>(size_t(input_shape.numel()), before), input_shape);
    module.backward(std::span(&input, 1), output, grad_output, std::span(&grad_input, 1), write);
    std::vector<std::vector<double>> all = {grad_input.to_vector<double>()};
    for (const StateEntry& e : state)
      if (e.trainable()) all.push_back(e.grad->to_vector<double>());
    return all;
  };
  const auto added = gradients(ops::GradientWrite::add, 0.0);
  const auto written = gradients(ops::GradientWrite::overwrite, std::nan(""));
  REQUIRE(added.size() == written.size());
  for (size_t k = 0; k < added.size(); ++k) {
    CAPTURE(k);  // 0: the input's gradient; then the parameters', in state order
    size_t differ = 0;
    for (size_t i = 0; i < added[k].size(); ++i) differ += !(added[k][i] == written[k][i]);
    CHECK(differ == 0);
  }
}

}  // namespace bareyolo::testing
