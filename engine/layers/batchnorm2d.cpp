// engine/layers/batchnorm2d.cpp — see batchnorm2d.h. The math is in kernels/cpu/batchnorm.cpp.
#include "engine/layers/batchnorm2d.h"

#include <stdexcept>

#include "engine/layers/init.h"

namespace bareyolo {

BatchNorm2d::BatchNorm2d(int channels, ops::BatchNormParams params, Device device, DType dtype)
    : channels_(channels), params_(params) {
  const Shape4 vector = {1, channels, 1, 1};
  gamma_ = filled_tensor(vector, 1.0, device, dtype);
  beta_ = Tensor::zeros(vector, device, dtype);
  gamma_grad_ = Tensor::zeros(vector, device, dtype);
  beta_grad_ = Tensor::zeros(vector, device, dtype);
  running_mean_ = Tensor::zeros(vector, device, dtype);
  running_var_ = filled_tensor(vector, 1.0, device, dtype);
  num_batches_tracked_ = Tensor::zeros({1, 1, 1, 1}, Device::cpu(), DType::i64);
  save_mean_ = Tensor::zeros(vector, device, dtype);
  save_invstd_ = Tensor::zeros(vector, device, dtype);
}

Shape4 BatchNorm2d::output_shape(std::span<const Shape4> inputs) const {
  if (inputs.size() != 1 || inputs[0].c != channels_)
    throw std::invalid_argument("BatchNorm2d expects one input with " +
                                std::to_string(channels_) + " channels, got " +
                                (inputs.empty() ? std::string("none") : inputs[0].str()));
  return inputs[0];
}

void BatchNorm2d::forward(std::span<const Tensor> inputs, Tensor& output, Mode mode) {
  last_mode_ = mode;
  with_float_type(gamma_.dtype(), [&]<class T>() {
    if (mode == Mode::train) {
      ops::batchnorm_forward_train<T>(inputs[0].view<T>(), gamma_.view<T>().data,
                                      beta_.view<T>().data, params_, running_mean_.view<T>().data,
                                      running_var_.view<T>().data, save_mean_.view<T>().data,
                                      save_invstd_.view<T>().data, output.view<T>());
      num_batches_tracked_.view<int64_t>().data[0] += 1;
    } else {
      ops::batchnorm_forward_eval<T>(inputs[0].view<T>(), gamma_.view<T>().data,
                                     beta_.view<T>().data, running_mean_.view<T>().data,
                                     running_var_.view<T>().data, params_, output.view<T>());
    }
  });
}

void BatchNorm2d::backward(std::span<const Tensor> inputs, const Tensor&,
                           const Tensor& grad_output, std::span<Tensor> grad_inputs) {
  with_float_type(gamma_.dtype(), [&]<class T>() {
    if (last_mode_ == Mode::train)
      ops::batchnorm_backward_train<T>(inputs[0].view<T>(), grad_output.view<T>(),
                                       gamma_.view<T>().data, save_mean_.view<T>().data,
                                       save_invstd_.view<T>().data, grad_inputs[0].view<T>(),
                                       gamma_grad_.view<T>().data, beta_grad_.view<T>().data);
    else
      ops::batchnorm_backward_eval<T>(inputs[0].view<T>(), grad_output.view<T>(),
                                      gamma_.view<T>().data, running_mean_.view<T>().data,
                                      running_var_.view<T>().data, params_,
                                      grad_inputs[0].view<T>(), gamma_grad_.view<T>().data,
                                      beta_grad_.view<T>().data);
  });
}

void BatchNorm2d::collect_state(const std::string& prefix, std::vector<StateEntry>& state) {
  const int64_t c = channels_;
  state.push_back({prefix + "weight", &gamma_, &gamma_grad_, {c}, ParamGroup::norm_weight});
  state.push_back({prefix + "bias", &beta_, &beta_grad_, {c}, ParamGroup::bias});
  state.push_back({prefix + "running_mean", &running_mean_, nullptr, {c}});
  state.push_back({prefix + "running_var", &running_var_, nullptr, {c}});
  state.push_back({prefix + "num_batches_tracked", &num_batches_tracked_, nullptr, {}});
}

}  // namespace bareyolo
