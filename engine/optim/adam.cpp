// engine/optim/adam.cpp — see adam.h.
#include "engine/optim/adam.h"

#include "kernels/ops.h"

namespace bareyolo {

Adam::Adam(ParameterArena& arena, AdamDecay decay, double lr, double beta1, double weight_decay,
           double beta2, double eps)
    : Optimizer(arena, lr, beta1, weight_decay),
      exp_avg_(add_state_buffer("exp_avg")),
      exp_avg_sq_(add_state_buffer("exp_avg_sq")),
      decay_(decay),
      beta1_(beta1),
      beta2_(beta2),
      eps_(eps) {}

void Adam::update() {
  std::array<ops::AdamParams, kGroups> groups;
  for (int g = 0; g < kGroups; ++g)
    groups[size_t(g)] = {group(g).lr,
                         beta1_,
                         beta2_,
                         eps_,
                         group(g).weight_decay,
                         steps(),
                         decay_ == AdamDecay::decoupled};
  with_float_type(params_.dtype(), [&]<class T>() {
    ops::adam_step<T>(flat_tensor_view<T>(params_), flat_tensor_view<T>(grads_),
                      flat_tensor_view<T>(exp_avg_), flat_tensor_view<T>(exp_avg_sq_),
                      flat_tensor_view<uint8_t>(group_of_), groups);
  });
}

}  // namespace bareyolo
