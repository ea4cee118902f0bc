// engine/optim/optimizer.cpp — see optimizer.h.
#include "engine/optim/optimizer.h"

#include <stdexcept>

namespace bareyolo {

Optimizer::Optimizer(ParameterArena& arena, double lr, double momentum, double weight_decay)
    : arena_(arena),
      params_(arena.value_range(0, arena.optimised())),
      grads_(arena.gradient_range(0, arena.optimised())) {
  if (arena.optimised() == 0)
    throw std::invalid_argument("the optimizer has no parameter to optimise (all frozen?)");
  groups_.fill({lr, momentum, 0.0});
  groups_[size_t(optimizer_group_index(ParamGroup::weight))].weight_decay = weight_decay;
  std::vector<uint8_t> group_of(size_t(arena.optimised()));
  for (const ParameterArena::Slot& slot : arena.slots())
    if (slot.grad && !slot.frozen)
      std::fill_n(group_of.begin() + slot.offset, slot.count,
                  uint8_t(optimizer_group_index(slot.group)));
  group_of_ = Tensor::from_vector(group_of, params_.shape(), arena.device());
}

Tensor Optimizer::add_state_buffer(const std::string& name) {
  Buffer buffer{name, Tensor::zeros(params_.shape(), arena_.device(), arena_.dtype()), {}};
  for (const ParameterArena::Slot& slot : arena_.slots())
    if (slot.grad && !slot.frozen)
      buffer.views.push_back(buffer.tensor.channels(slot.offset, slot.offset + slot.count)
                                 .reshape(slot.value->shape()));
  buffers_.push_back(std::move(buffer));
  return buffers_.back().tensor;
}

std::vector<std::pair<std::string, Tensor*>> Optimizer::state() {
  std::vector<const ParameterArena::Slot*> optimised;
  for (const ParameterArena::Slot& slot : arena_.slots())
    if (slot.grad && !slot.frozen) optimised.push_back(&slot);
  // The arena holds them in reverse registration order; checkpoints list them forward, each
  // parameter's buffers together.
  std::vector<std::pair<std::string, Tensor*>> named;
  for (size_t i = optimised.size(); i-- > 0;)
    for (Buffer& buffer : buffers_)
      named.emplace_back(buffer.name + "." + optimised[i]->name, &buffer.views[i]);
  return named;
}

}  // namespace bareyolo
