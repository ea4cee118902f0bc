// engine/optim/sgd.cpp — see sgd.h.
#include "engine/optim/sgd.h"

#include "kernels/ops.h"

namespace bareyolo {

Sgd::Sgd(ParameterArena& arena, double lr, double momentum, double weight_decay, bool nesterov)
    : Optimizer(arena, lr, momentum, weight_decay),
      velocity_(add_state_buffer("momentum_buffer")),
      nesterov_(nesterov) {}

void Sgd::update() {
  std::array<ops::SgdParams, kGroups> groups;
  for (int g = 0; g < kGroups; ++g)
    groups[size_t(g)] = {group(g).lr, group(g).momentum, group(g).weight_decay, nesterov_};
  with_float_type(params_.dtype(), [&]<class T>() {
    ops::sgd_step<T>(flat_tensor_view<T>(params_), flat_tensor_view<T>(grads_),
                     flat_tensor_view<T>(velocity_), flat_tensor_view<uint8_t>(group_of_), groups);
  });
}

}  // namespace bareyolo
