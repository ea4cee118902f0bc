// engine/optim/sgd.cpp — see sgd.h.
#include "engine/optim/sgd.h"

#include "kernels/ops.h"
#include "kernels/optim_update.h"

namespace bareyolo {

Sgd::Sgd(ParameterArena& arena, double lr, double momentum, double weight_decay, bool nesterov)
    : Optimizer(arena, lr, momentum, weight_decay),
      velocity_(add_state_buffer("momentum_buffer")),
      nesterov_(nesterov) {
  with_float_type(params_.dtype(), [&]<class T>() {
    settings_ = arena.step_scalars().reserve<ops::SgdFactors<T>>(kGroups);
  });
}

void Sgd::stage(int64_t) {
  with_float_type(params_.dtype(), [&]<class T>() {
    std::array<ops::SgdFactors<T>, kGroups> factors;
    for (int g = 0; g < kGroups; ++g)
      factors[size_t(g)] = ops::SgdFactors<T>::of(
          {group(g).lr, group(g).momentum, group(g).weight_decay, nesterov_});
    arena_.step_scalars().set(settings_, std::span<const ops::SgdFactors<T>>(factors));
  });
}

void Sgd::update() {
  with_float_type(params_.dtype(), [&]<class T>() {
    ops::sgd_step<T>(flat_tensor_view<T>(params_), flat_tensor_view<T>(grads_),
                     flat_tensor_view<T>(velocity_), flat_tensor_view<uint8_t>(group_of_),
                     arena_.step_scalars().at<ops::SgdFactors<T>>(settings_), kGroups);
  });
}

}  // namespace bareyolo
