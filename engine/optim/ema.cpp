// engine/optim/ema.cpp — see ema.h.
#include "engine/optim/ema.h"

#include <cmath>
#include <stdexcept>

#include "engine/tensor.h"
#include "kernels/ops.h"

namespace bareyolo {

ModelEma::ModelEma(const std::vector<StateEntry>& model_state, int64_t updates)
    : updates_(updates) {
  for (const StateEntry& e : model_state) values_.push_back(e.value->to(e.value->device()));
}

double ModelEma::decay() const { return 0.9999 * (1 - std::exp(-double(updates_ + 1) / 2000)); }

void ModelEma::update(const std::vector<StateEntry>& model_state) {
  if (model_state.size() != values_.size())
    throw std::invalid_argument("ModelEma::update: the model has " +
                                std::to_string(model_state.size()) + " state entries, the EMA " +
                                std::to_string(values_.size()));
  const double d = decay();
  ++updates_;
  for (size_t i = 0; i < values_.size(); ++i) {
    Tensor& average = values_[i];
    const Tensor& value = *model_state[i].value;
    if (value.dtype() == DType::i64) {
      average.copy_from(value);
      continue;
    }
    with_float_type(value.dtype(), [&]<class T>() {
      View<T> a = average.view<T>();
      View<const T> v = value.view<T>();
      ops::ema_update<T>(flat_view(a.data, a.shape.numel(), a.device),
                         flat_view(v.data, v.shape.numel(), v.device), d);
    });
  }
}

}  // namespace bareyolo
