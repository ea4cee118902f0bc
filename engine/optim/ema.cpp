// engine/optim/ema.cpp — see ema.h.
#include "engine/optim/ema.h"

#include <cmath>
#include <map>

#include "kernels/ops.h"

namespace bareyolo {

ModelEma::ModelEma(ParameterArena& arena, const std::vector<StateEntry>& state, int64_t updates)
    : arena_(arena), average_(arena.values().to(arena.device())), updates_(updates) {
  std::map<const Tensor*, const ParameterArena::Slot*> slot_of;
  for (const ParameterArena::Slot& slot : arena.slots()) slot_of[slot.value] = &slot;
  values_.reserve(state.size());
  for (const StateEntry& e : state) {
    if (const auto it = slot_of.find(e.value); it != slot_of.end()) {
      const ParameterArena::Slot& slot = *it->second;
      values_.push_back(
          average_.channels(slot.offset, slot.offset + slot.count).reshape(e.value->shape()));
    } else {
      outside_.push_back({e.value, values_.size()});
      values_.push_back(e.value->to(e.value->device()));
    }
  }
}

double ModelEma::decay() const { return 0.9999 * (1 - std::exp(-double(updates_ + 1) / 2000)); }

void ModelEma::update() {
  const double d = decay();
  ++updates_;
  with_float_type(average_.dtype(), [&]<class T>() {
    ops::ema_update<T>(flat_tensor_view<T>(average_), flat_tensor_view<T>(arena_.values()), d);
  });
  // The entries outside the arena one by one: floating ones averaged in their own dtype,
  // integer ones copied.
  for (const Outside& o : outside_) {
    Tensor& average = values_[o.index];
    if (o.source->dtype() == DType::i64) {
      average.copy_from(*o.source);
      continue;
    }
    with_float_type(average.dtype(), [&]<class T>() {
      ops::ema_update<T>(flat_tensor_view<T>(average), flat_tensor_view<T>(*o.source), d);
    });
  }
}

}  // namespace bareyolo
