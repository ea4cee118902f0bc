// engine/optim/ema.cpp — see ema.h.
#include "engine/optim/ema.h"

#include <cmath>
#include <map>

#include "kernels/ops.h"
#include "kernels/optim_update.h"

namespace bareyolo {

ModelEma::ModelEma(ParameterArena& arena, const std::vector<StateEntry>& state, int64_t updates)
    : arena_(arena),
      float_factors_(arena.step_scalars().reserve<ops::EmaFactors<float>>(1)),
      double_factors_(arena.step_scalars().reserve<ops::EmaFactors<double>>(1)),
      average_(arena.values().to(arena.device())),
      updates_(updates) {
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

void ModelEma::stage_decay() {
  const double d = decay();
  const ops::EmaFactors<float> in_float = ops::EmaFactors<float>::of(d);
  const ops::EmaFactors<double> in_double = ops::EmaFactors<double>::of(d);
  arena_.step_scalars().set(float_factors_, std::span{&in_float, 1});
  arena_.step_scalars().set(double_factors_, std::span{&in_double, 1});
}

void ModelEma::advance() {
  stage_decay();
  ++updates_;
  for (const Outside& o : outside_)  // the integer entries (BatchNorm's counters): copied
    if (o.source->dtype() == DType::i64) values_[o.index].copy_from(*o.source);
}

void ModelEma::update() {
  advance();
  StepScalars& scalars = arena_.step_scalars();
  const auto factors = [&]<class T>() {
    return scalars.at<ops::EmaFactors<T>>(std::is_same_v<T, float> ? float_factors_
                                                                   : double_factors_);
  };
  with_float_type(average_.dtype(), [&]<class T>() {
    ops::ema_update<T>(flat_tensor_view<T>(average_), flat_tensor_view<T>(arena_.values()),
                       factors.template operator()<T>());
  });
  // The floating entries outside the arena one by one, each in its own dtype (advance() copied
  // the integer ones).
  for (const Outside& o : outside_) {
    Tensor& average = values_[o.index];
    if (o.source->dtype() == DType::i64) continue;
    with_float_type(average.dtype(), [&]<class T>() {
      ops::ema_update<T>(flat_tensor_view<T>(average), flat_tensor_view<T>(*o.source),
                         factors.template operator()<T>());
    });
  }
}

}  // namespace bareyolo
