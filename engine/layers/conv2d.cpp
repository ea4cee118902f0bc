// engine/layers/conv2d.cpp — see conv2d.h.
#include "engine/layers/conv2d.h"

#include <cmath>
#include <stdexcept>
#include <type_traits>

#include "engine/tensor_factories.h"
#include "kernels/ops.h"

namespace bareyolo {

namespace {
ops::Conv2dParams conv_params(const Conv2dOptions& o) {
  int pad = o.pad < 0 ? o.kernel / 2 : o.pad;
  return {o.stride, o.stride, pad, pad};
}

// The weights a convolution of T activations reads: the masters, or their bf16 copy.
template <class T>
View<const T> operand_weights(const Tensor& weight, const Tensor& weight_bf16) {
  if constexpr (std::is_same_v<T, bf16>)
    return weight_bf16.view<bf16>();
  else
    return weight.view<T>();
}
}  // namespace

Conv2d::Conv2d(const Conv2dOptions& options, std::mt19937_64& rng, Device device, DType dtype)
    : options_(options) {
  if (options.c_in < 1 || options.c_out < 1 || options.kernel < 1 || options.stride < 1)
    throw std::invalid_argument("Conv2d: channels, kernel and stride must be positive (c_in=" +
                                std::to_string(options.c_in) +
                                " c_out=" + std::to_string(options.c_out) +
                                " kernel=" + std::to_string(options.kernel) + ")");
  const Shape4 weight_shape = {options.c_out, options.c_in, options.kernel, options.kernel};
  const float bound =
      1.0f / std::sqrt(static_cast<float>(options.c_in * options.kernel * options.kernel));
  weight_ = uniform_tensor(weight_shape, bound, rng, device, dtype);
  weight_grad_ = Tensor::zeros(weight_shape, device, dtype);
  if (options.bias) {
    bias_ = uniform_tensor({1, options.c_out, 1, 1}, bound, rng, device, dtype);
    bias_grad_ = Tensor::zeros(bias_.shape(), device, dtype);
  }
}

Shape4 Conv2d::output_shape(std::span<const Shape4> inputs) const {
  if (inputs.size() != 1 || inputs[0].c != options_.c_in)
    throw std::invalid_argument("Conv2d expects one input with " + std::to_string(options_.c_in) +
                                " channels, got " +
                                (inputs.empty() ? std::string("none") : inputs[0].str()));
  const ops::Conv2dParams p = conv_params(options_);
  return {inputs[0].n, options_.c_out,
          ops::conv_out_size(inputs[0].h, options_.kernel, p.stride_h, p.pad_h),
          ops::conv_out_size(inputs[0].w, options_.kernel, p.stride_w, p.pad_w)};
}

void Conv2d::forward(std::span<const Tensor> inputs, Tensor& output, Mode) {
  forward_into(inputs[0], output, nullptr, nullptr);
}

void Conv2d::forward_with_moments(const Tensor& input, Tensor& output, Tensor& mean, Tensor& m2) {
  forward_into(input, output, &mean, &m2);
}

void Conv2d::forward_into(const Tensor& input, Tensor& output, Tensor* mean, Tensor* m2) {
  if (input.dtype() == DType::bf16) {
    if (weight_.dtype() != DType::f32)
      throw std::invalid_argument(std::string("Conv2d: bf16 activations need float weights, not ") +
                                  dtype_name(weight_.dtype()));
    if (!weight_bf16_.kept) {  // the weights may have changed since the last forward (a step)
      // In the input's layout: KRSC beside channels-last activations (kernels/krsc_weights.h).
      ensure_tensor(weight_bf16_.tensor, weight_.shape(), input);
      weight_bf16_.tensor.convert_from(weight_);
    }
  }
  with_activation_type(input.dtype(), [&]<class T>() {
    using P = ComputeType<T>;
    ops::conv2d_forward<T>(input.view<T>(), operand_weights<T>(weight_, weight_bf16_.tensor),
                           options_.bias ? bias_.view<P>().data : nullptr, conv_params(options_),
                           output.view<T>(), mean ? mean->view<P>().data : nullptr,
                           m2 ? m2->view<P>().data : nullptr);
  });
}

void Conv2d::backward(std::span<const Tensor> inputs, const Tensor&, const Tensor& grad_output,
                      std::span<Tensor> grad_inputs, ops::GradientWrite write) {
  // grad_inputs[0] is undefined for the network input: no gradient wanted.
  with_activation_type(grad_output.dtype(), [&]<class T>() {
    using P = ComputeType<T>;
    ops::conv2d_backward_weight<T>(inputs[0].view<T>(), grad_output.view<T>(),
                                   conv_params(options_), weight_grad_.view<P>(),
                                   options_.bias ? bias_grad_.view<P>().data : nullptr);
    if (grad_inputs[0].defined())
      ops::conv2d_backward_data<T>(grad_output.view<T>(),
                                   operand_weights<T>(weight_, weight_bf16_.tensor),
                                   conv_params(options_), grad_inputs[0].view<T>(), write);
  });
}

void Conv2d::collect_state(const std::string& prefix, std::vector<StateEntry>& state) {
  state.push_back({prefix + "weight",
                   &weight_,
                   &weight_grad_,
                   {options_.c_out, options_.c_in, options_.kernel, options_.kernel},
                   ParamGroup::weight,
                   &weight_bf16_});
  if (options_.bias)
    state.push_back({prefix + "bias", &bias_, &bias_grad_, {options_.c_out}, ParamGroup::bias});
}

}  // namespace bareyolo
