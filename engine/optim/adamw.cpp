// engine/optim/adamw.cpp — see adamw.h.
#include "engine/optim/adamw.h"

#include "engine/tensor.h"
#include "kernels/ops.h"

namespace bareyolo {

AdamW::AdamW(const std::vector<StateEntry>& state, double lr, double beta1, double weight_decay,
             double beta2, double eps)
    : beta1_(beta1), beta2_(beta2), eps_(eps) {
  groups_[kBiases] = {lr, 0.0};
  groups_[kWeights] = {lr, weight_decay};
  groups_[kNormWeights] = {lr, 0.0};
  for (const StateEntry& e : state) {
    if (!e.trainable()) continue;
    params_.push_back(e);
    group_of_.push_back(optimizer_group_index(e.group));
    exp_avg_.push_back(Tensor::zeros(e.value->shape(), e.value->device(), e.value->dtype()));
    exp_avg_sq_.push_back(Tensor::zeros(e.value->shape(), e.value->device(), e.value->dtype()));
  }
}

void AdamW::step() {
  ++steps_;
  for (size_t i = 0; i < params_.size(); ++i) {
    const AdamWGroup& g = groups_[size_t(group_of_[i])];
    const ops::AdamWParams p{g.lr, beta1_, beta2_, eps_, g.weight_decay, steps_};
    with_float_type(params_[i].value->dtype(), [&]<class T>() {
      ops::adamw_step<T>(flat_tensor_view<T>(*params_[i].value),
                         flat_tensor_view<T>(*params_[i].grad), flat_tensor_view<T>(exp_avg_[i]),
                         flat_tensor_view<T>(exp_avg_sq_[i]), p);
    });
  }
}

void AdamW::zero_grad() {
  for (const StateEntry& e : params_) e.grad->zero();
}

}  // namespace bareyolo
