// engine/optim/sgd.cpp — see sgd.h.
#include "engine/optim/sgd.h"

#include "kernels/ops.h"
#include "kernels/optim_update.h"

namespace bareyolo {

Sgd::Sgd(ParameterArena& arena, double lr, double momentum, double weight_decay, bool nesterov)
    : Optimizer(arena, lr, momentum, weight_decay),
      velocity_(add_state_buffer("momentum_buffer")),
      nesterov_(nesterov) {
  reserve_factors<ops::SgdFactors>();
}

void Sgd::stage(int64_t) {
  stage_factors<ops::SgdFactors>([&](const Group& g) {
    return ops::SgdParams{g.lr, g.momentum, g.weight_decay, nesterov_};
  });
}

void Sgd::update() {
  with_float_type(params_.dtype(), [&]<class T>() {
    ops::sgd_step<T>(flat_tensor_view<T>(params_), flat_tensor_view<T>(grads_),
                     flat_tensor_view<T>(velocity_), flat_tensor_view<uint8_t>(group_of_),
                     factors_on_device<ops::SgdFactors, T>(), kGroups);
  });
}

}  // namespace bareyolo
