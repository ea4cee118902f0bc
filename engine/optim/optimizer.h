// engine/optim/optimizer.h — the one interface of the update rules (Caffe's Solver, the rule
// alone), over a parameter arena (engine/parameter_arena.h): SGD (sgd.h), Adam and AdamW (adam.h).
//
//   step()        one update of every optimised parameter from its gradient: one pass over the
//                 arena, each element with its group's settings (one kernel launch on a GPU),
//                 which it reads from the arena's step scalars (engine/step_scalars.h)
//   stage_settings()  the next step's settings written there ahead of it (the Solver's, so
//                 that they go up before the step's kernels are issued)
//   advance()     step()'s host half alone: the count and the settings, no kernel (a replayed
//                 CUDA graph of the step runs the kernel: kernels/step_graph.h)
//   zero_grad()   the gradient arena set to zero: one fill
//   groups        YOLOv5's three parameter groups (optimizer_group_index: 0 biases, 1 decayed
//                 weights, 2 normalisation weights), each with its learning rate and momentum
//   state()       the optimizer's named tensors, for checkpoints: "<buffer>.<parameter>" views
//                 of its own arenas (momentum_buffer.* for SGD; exp_avg.*, exp_avg_sq.* for Adam)
//   steps()       updates taken so far (Adam's bias correction counts them; a resumed run sets it)
//   kernel()      the op step() runs, so that a run refuses a device without it before it starts
#pragma once

#include <array>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "engine/parameter_arena.h"

namespace bareyolo {

class Optimizer {
 public:
  static constexpr int kGroups = 3;
  struct Group {
    double lr = 0, momentum = 0, weight_decay = 0;
  };

  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  void step() {
    advance();
    update();
  }
  void advance() {
    ++steps_;
    stage(steps_);
  }
  void stage_settings() { stage(steps_ + 1); }
  void zero_grad() { arena_.gradients().zero(); }
  Group& group(int index) { return groups_.at(size_t(index)); }
  const Group& group(int index) const { return groups_.at(size_t(index)); }
  int64_t steps() const { return steps_; }
  void set_steps(int64_t steps) { steps_ = steps; }
  // Named state tensors in registration order of the parameters.
  std::vector<std::pair<std::string, Tensor*>> state();
  virtual const char* kernel() const = 0;

 protected:
  // weight_decay applies to group 1 (the weights) alone, as in YOLOv5.
  Optimizer(ParameterArena& arena, double lr, double momentum, double weight_decay);
  // Writes the settings of update number `step` into the step scalars (stage_factors).
  virtual void stage(int64_t step) = 0;
  // The update of step `steps()` (already counted, its settings staged) over the optimised
  // range, reading its settings from the device.
  virtual void update() = 0;
  // The update's per-group factors in the step scalars (engine/step_scalars.h), as the derived
  // rule's Factors<T> (kernels/optim_update.h) in the parameters' dtype T: its slot reserved
  // (at construction), written from each group's settings (stage), and where the kernel reads
  // them (update).
  template <template <class> class Factors>
  void reserve_factors() {
    with_float_type(params_.dtype(), [&]<class T>() {
      settings_ = arena_.step_scalars().reserve<Factors<T>>(kGroups);
    });
  }
  template <template <class> class Factors, class SettingsOf>
  void stage_factors(const SettingsOf& settings_of) {
    with_float_type(params_.dtype(), [&]<class T>() {
      std::array<Factors<T>, kGroups> factors;
      for (int g = 0; g < kGroups; ++g) factors[size_t(g)] = Factors<T>::of(settings_of(group(g)));
      arena_.step_scalars().set(settings_, std::span<const Factors<T>>(factors));
    });
  }
  template <template <class> class Factors, class T>
  const Factors<T>* factors_on_device() {
    return arena_.step_scalars().at<Factors<T>>(settings_);
  }
  // A zeroed buffer the size of the optimised range, whose per-parameter views state() names
  // "<buffer>.<parameter>" (derived constructors add theirs).
  Tensor add_state_buffer(const std::string& buffer);

  ParameterArena& arena_;
  Tensor params_, grads_;  // the arena's optimised range
  Tensor group_of_;        // u8: each optimised element's group
  std::array<Group, kGroups> groups_;

 private:
  StepScalars::Slot settings_;  // the groups' factors (reserve_factors)
  struct Buffer {
    std::string name;
    Tensor tensor;
    std::vector<Tensor> views;  // one per optimised slot, in arena order
  };
  std::vector<Buffer> buffers_;
  int64_t steps_ = 0;
};

}  // namespace bareyolo
