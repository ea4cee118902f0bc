// engine/parameter_arena.cpp — see parameter_arena.h.
#include "engine/parameter_arena.h"

#include <stdexcept>
#include <vector>

#include "kernels/ops.h"
#include "kernels/round_up.h"

namespace bareyolo {

namespace {

// The arena's dtype: its parameters'. The first trainable entry's, else the first floating one's.
DType arena_dtype(const std::vector<StateEntry>& state) {
  for (const StateEntry& e : state)
    if (e.trainable()) return e.value->dtype();
  for (const StateEntry& e : state)
    if (e.value->dtype() == DType::f32 || e.value->dtype() == DType::f64) return e.value->dtype();
  throw std::invalid_argument("ParameterArena: no floating-point state entry");
}

// The entries of `state` the arena holds, in its order: optimised parameters and frozen ones,
// each in reverse registration order, then the buffers of the arena's dtype in registration
// order.
std::vector<const StateEntry*> arena_order(const std::vector<StateEntry>& state,
                                           const ArenaOptions& options) {
  const DType dtype = arena_dtype(state);
  auto frozen = [&](const StateEntry& e) { return options.frozen && options.frozen(e); };
  std::vector<const StateEntry*> order;
  for (const bool want_frozen : {false, true})
    for (auto it = state.rbegin(); it != state.rend(); ++it)
      if (it->trainable() && frozen(*it) == want_frozen) order.push_back(&*it);
  for (const StateEntry& e : state)
    if (!e.trainable() && e.value->dtype() == dtype) order.push_back(&e);
  return order;
}

// `tensor` re-pointed to `range` (a dense view of the same elements), values kept.
void move_into(Tensor& tensor, const Tensor& range) {
  Tensor view = range.reshape(tensor.shape());
  view.copy_from(tensor);
  tensor = view;
}

}  // namespace

ParameterArena::ParameterArena(const std::vector<StateEntry>& state, ArenaOptions options) {
  const std::vector<const StateEntry*> order = arena_order(state, options);
  const Device device = order.front()->value->device();
  const DType dtype = order.front()->value->dtype();
  int64_t values = 0;
  for (const StateEntry* e : order) {
    if (!(e->value->device() == device) || e->value->dtype() != dtype)
      throw std::invalid_argument("ParameterArena: " + e->name + " is " +
                                  dtype_name(e->value->dtype()) + " on " +
                                  e->value->device().str() + ", the arena " + dtype_name(dtype) +
                                  " on " + device.str() + ": one device and dtype for every entry");
    Slot slot{e->name,
              e->value,
              e->trainable() ? e->grad : nullptr,
              round_up(values, ParameterArena::kSlotAlignment),
              e->value->numel(),
              e->group,
              e->trainable() && options.frozen && options.frozen(*e),
              e->bf16};
    values = slot.offset + slot.count;
    if (e->trainable()) {
      parameter_count_ += slot.count;
      parameters_ = values;
      if (!slot.frozen) optimised_ = values;
    }
    slots_.push_back(std::move(slot));
  }

  values_ = Tensor::zeros({1, values, 1, 1}, device, dtype);  // the gaps stay zero
  gradients_ = Tensor::zeros({1, parameters_, 1, 1}, device, dtype);
  for (const Slot& slot : slots_) {
    move_into(*slot.value, value_range(slot.offset, slot.offset + slot.count));
    if (slot.grad) move_into(*slot.grad, gradient_range(slot.offset, slot.offset + slot.count));
  }
  step_scalars_ = std::make_unique<StepScalars>(device);
  squared_norm_ = Tensor::empty({1, 1, 1, 1}, device, DType::f64);
}

ParameterArena::~ParameterArena() {
  if (!bf16_copies_.defined()) return;
  for (const Slot& slot : slots_)
    if (slot.bf16 && slot.bf16->kept) *slot.bf16 = {};
}

void ParameterArena::keep_bf16_copies(Layout layout) {
  if (bf16_copies_.defined()) return;
  if (dtype() != DType::f32)
    throw std::invalid_argument(std::string("ParameterArena: bf16 copies of ") +
                                dtype_name(dtype()) +
                                " parameters; mixed precision keeps float masters");
  bf16_copies_ = Tensor::empty({1, parameters_, 1, 1}, device(), DType::bf16);
  std::vector<int64_t> segments;  // kernels/krsc_weights.h, in arena order (sorted by offset)
  for (const Slot& slot : slots_)
    if (slot.bf16 && slot.grad) {  // a parameter's: inside [0, parameters())
      const Shape4 shape = slot.value->shape();
      Tensor copy =
          bf16_copies_.channels(slot.offset, slot.offset + slot.count).prefix(shape, layout);
      if (copy.layout() == Layout::channels_last)  // not where the two layouts coincide
        segments.insert(segments.end(), {slot.offset, shape.n, shape.c, shape.plane()});
      slot.bf16->tensor = copy;
      slot.bf16->kept = true;
    }
  if (!segments.empty())
    krsc_segments_ = Tensor::from_vector(segments, {1, 1, 1, int64_t(segments.size())}, device());
  refresh_bf16_copies();
}

void ParameterArena::refresh_bf16_copies() {
  if (!bf16_copies_.defined()) return;
  const Tensor values = value_range(0, parameters_);
  if (!krsc_segments_.defined()) return bf16_copies_.convert_from(values);
  ops::round_weights_to_bf16(values.view<float>(), bf16_copies_.view<bf16>(),
                             krsc_segments_.view<int64_t>());
}

}  // namespace bareyolo
