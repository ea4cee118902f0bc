// engine/optim/sgd.cpp — see sgd.h.
#include "engine/optim/sgd.h"

#include <cmath>

#include "engine/tensor.h"

namespace bareyolo {

Sgd::Sgd(const std::vector<StateEntry>& state, double lr, double momentum, double weight_decay,
         bool nesterov)
    : nesterov_(nesterov) {
  groups_[kBiases] = {lr, momentum, 0.0};
  groups_[kWeights] = {lr, momentum, weight_decay};
  groups_[kNormWeights] = {lr, momentum, 0.0};
  for (const StateEntry& e : state) {
    if (!e.trainable()) continue;
    params_.push_back(e);
    group_of_.push_back(optimizer_group_index(e.group));
    velocity_.push_back(Tensor::zeros(e.value->shape(), e.value->device(), e.value->dtype()));
  }
}

void Sgd::step() {
  for (size_t i = 0; i < params_.size(); ++i) {
    const SgdGroup& g = groups_[size_t(group_of_[i])];
    const ops::SgdParams p{g.lr, g.momentum, g.weight_decay, nesterov_};
    with_float_type(params_[i].value->dtype(), [&]<class T>() {
      ops::sgd_step<T>(flat_tensor_view<T>(*params_[i].value),
                       flat_tensor_view<T>(*params_[i].grad), flat_tensor_view<T>(velocity_[i]), p);
    });
  }
}

void Sgd::zero_grad() {
  for (const StateEntry& e : params_) e.grad->zero();
}

double clip_gradient_norm(const std::vector<StateEntry>& parameters, double max_norm) {
  double squares = 0;
  for (const StateEntry& e : parameters)
    if (e.trainable())
      with_float_type(e.grad->dtype(), [&]<class T>() {
        squares += ops::sum_of_squares<T>(flat_tensor_view<T>(*e.grad));
      });
  const double norm = std::sqrt(squares);
  const double factor = max_norm / (norm + 1e-6);
  if (factor < 1)
    for (const StateEntry& e : parameters)
      if (e.trainable())
        with_float_type(e.grad->dtype(), [&]<class T>() {
          ops::scale_inplace<T>(flat_tensor_view<T>(*e.grad), factor);
        });
  return norm;
}

}  // namespace bareyolo
