// engine/parameter_arena.h — every parameter of a model in one flat buffer and every gradient in
// another, as llm.c allocates all parameters at once and Caffe keeps them in one array: each
// parameter and gradient tensor of the modules becomes a view of its slot, values kept. Then
// zero_grad is one fill, the gradient norm one reduction, SGD, AdamW and the EMA one pass each,
// and the reducer's buckets are ranges of the gradient arena (no second copy).
//
// Layout of both arenas, elements in this order:
//   1. the optimised parameters, in REVERSE registration order: the order backward finalises
//      their gradients, so that a range of consecutive gradients (a reducer bucket) is complete
//      after one stretch of backward;
//   2. the frozen parameters (--freeze), the same way: outside every optimizer pass and bucket;
//   3. values only: the buffers of the parameters' dtype (BatchNorm's running statistics), which
//      the EMA averages with the parameters.
// Each slot begins at a multiple of kSlotAlignment elements, zeros between them (which every
// pass over a range leaves zero: zero gradients, zero values), so that a weight, its gradient
// and its bf16 copy are aligned as a tensor of their own would be: cuDNN's tensor-core kernels
// refuse operands off 16 bytes, and the update kernels load 16 bytes at a time.
// Other entries stay the modules' own tensors: integer ones (num_batches_tracked) and buffers
// of another dtype (the Detect head's anchors, always f64).
//
// Its entries are on one device and of one floating dtype (f32 to train; f64 in gradient
// checks), which the value arena takes; the gradient arena has a dtype of its own (today the
// same), so that mixed precision can keep f32 masters beside narrower gradients.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/module.h"
#include "engine/step_scalars.h"

namespace bareyolo {

struct ArenaOptions {
  // Parameters that are not optimised (--freeze); empty: none.
  std::function<bool(const StateEntry&)> frozen = {};
};

class ParameterArena {
 public:
  // A state entry's place in the arenas.
  struct Slot {
    std::string name;
    Tensor* value = nullptr;  // the module's tensors, now views of [offset, offset + count)
    Tensor* grad = nullptr;   // null for buffers
    int64_t offset = 0, count = 0;
    ParamGroup group = ParamGroup::weight;
    bool frozen = false;
    Bf16Copy* bf16 = nullptr;  // the module's bf16 copy (keep_bf16_copies)
  };

  // Moves every floating entry of `state` into the arenas and re-points its tensors. The
  // modules must outlive the arena (their tensors are re-pointed, not owned).
  explicit ParameterArena(const std::vector<StateEntry>& state, ArenaOptions options = {});
  ParameterArena(const ParameterArena&) = delete;
  ParameterArena& operator=(const ParameterArena&) = delete;
  // Hands the bf16 copies back to their modules (which round at every forward again).
  ~ParameterArena();

  // 64 elements: 256 bytes of float, 128 of the bf16 copies.
  static constexpr int64_t kSlotAlignment = 64;

  // The whole arenas, as (1, n, 1, 1) tensors: values (parameters, then buffers) and
  // gradients (the parameters').
  Tensor& values() { return values_; }
  Tensor& gradients() { return gradients_; }
  // Elements [0, optimised()) of both arenas: the optimised parameters; [0, parameters()):
  // all parameters.
  int64_t optimised() const { return optimised_; }
  int64_t parameters() const { return parameters_; }
  // How many parameter values there are (the slots' counts, without the gaps between them).
  int64_t parameter_count() const { return parameter_count_; }
  // The slots in arena order: parameters (optimised, then frozen), then buffers.
  const std::vector<Slot>& slots() const { return slots_; }
  Device device() const { return values_.device(); }
  DType dtype() const { return values_.dtype(); }

  // Views of element ranges [begin, end): of the value arena, of the gradient arena.
  Tensor value_range(int64_t begin, int64_t end) { return values_.channels(begin, end); }
  Tensor gradient_range(int64_t begin, int64_t end) { return gradients_.channels(begin, end); }
  // The numbers the update passes read that change every step (learning rates, momentum, Adam's
  // corrections, the EMA's decay), in one block on the arena's device (step_scalars.h): the
  // optimizer and the EMA reserve their slots in it.
  StepScalars& step_scalars() { return *step_scalars_; }
  // One f64 on the arena's device that gradient clipping sums the gradients' squares into: the
  // same memory every step (engine/optim/clip.h).
  Tensor& squared_norm() { return squared_norm_; }

  // Mixed precision: the modules' bf16 copies of their parameters (StateEntry::bf16, Conv2d's
  // weight) become views of one bf16 arena beside the parameters, which refresh_bf16_copies()
  // rounds from them in one pass: the Solver's, once per optimizer step, instead of one cast per
  // convolution at every forward. Until the arena goes, the modules read their copies as they
  // are (Bf16Copy::kept), so whoever changes a parameter refreshes them. With `layout`
  // channels last, a convolution weight's copy is channels last too (KRSC, what a channels-last
  // convolution reads: kernels/krsc_weights.h), transposed by the same pass.
  void keep_bf16_copies(Layout layout = Layout::nchw);
  void refresh_bf16_copies();

 private:
  Tensor values_, gradients_, squared_norm_;
  Tensor bf16_copies_;    // bf16, the parameters' range, once keep_bf16_copies() ran
  Tensor krsc_segments_;  // i64 on the arena's device: the copies held KRSC (none in NCHW)
  std::unique_ptr<StepScalars> step_scalars_;
  std::vector<Slot> slots_;
  int64_t optimised_ = 0, parameters_ = 0, parameter_count_ = 0;
};

}  // namespace bareyolo
