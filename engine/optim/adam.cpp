// engine/optim/adam.cpp — see adam.h.
#include "engine/optim/adam.h"

#include "kernels/ops.h"
#include "kernels/optim_update.h"

namespace bareyolo {

Adam::Adam(ParameterArena& arena, AdamDecay decay, double lr, double beta1, double weight_decay,
           double beta2, double eps)
    : Optimizer(arena, lr, beta1, weight_decay),
      exp_avg_(add_state_buffer("exp_avg")),
      exp_avg_sq_(add_state_buffer("exp_avg_sq")),
      decay_(decay),
      beta1_(beta1),
      beta2_(beta2),
      eps_(eps) {
  reserve_factors<ops::AdamFactors>();
}

void Adam::stage(int64_t step) {
  stage_factors<ops::AdamFactors>([&](const Group& g) {
    return ops::AdamParams{
        g.lr, beta1_, beta2_, eps_, g.weight_decay, step, decay_ == AdamDecay::decoupled};
  });
}

void Adam::update() {
  with_float_type(params_.dtype(), [&]<class T>() {
    ops::adam_step<T>(flat_tensor_view<T>(params_), flat_tensor_view<T>(grads_),
                      flat_tensor_view<T>(exp_avg_), flat_tensor_view<T>(exp_avg_sq_),
                      flat_tensor_view<uint8_t>(group_of_),
                      factors_on_device<ops::AdamFactors, T>(), kGroups);
  });
}

}  // namespace bareyolo
