// engine/backward_scratch.h — gradient buffers a module needs only inside its own backward.
//
// A block's backward holds gradients between its children that are dead once it returns:
// C3's concatenation and stages, a Bottleneck's hidden map, ConvBnSilu's gradient between BN
// and the convolution. Kept per module, each costs an activation-sized buffer per layer for
// the whole step, as much again as the layer's output. Here they are slots of one stack: a
// backward takes its buffers through a BackwardScratch and gives them back when that goes out
// of scope, so a block nested in another stacks its slots on top of its parent's, and what is
// held is, per stack depth, the largest buffer that depth has needed — reused every step.
//
// The stack is per thread (one thread runs a graph's backward). A slot keeps one device and
// dtype; a request for another reallocates it. Slots are reference-counted tensors, so a
// buffer handed out stays valid for as long as it is held, even past its frame.
#pragma once

#include <vector>

#include "engine/tensor.h"

namespace bareyolo {

class BackwardScratch {
 public:
  BackwardScratch();
  ~BackwardScratch();  // gives this frame's slots back to the stack
  BackwardScratch(const BackwardScratch&) = delete;
  BackwardScratch& operator=(const BackwardScratch&) = delete;

  // A packed tensor of `shape` on `like`'s device with its dtype and layout, from the next slot of
  // the stack, holding whatever the slot held: its first writer writes every value (the fused
  // BatchNorm + SiLU backward ops, a backward told GradientWrite::overwrite), so no zeroing pass.
  Tensor uninitialized(Shape4 shape, const Tensor& like);

 private:
  size_t first_slot_;  // the stack's depth when this frame began
};

// Frees this thread's slots (Graph::release_activations), e.g. before evaluating at another
// size; the next backward allocates them again.
void release_backward_scratch();
// This thread's slots as they are: a CUDA graph of a backward holds them, since it reads and
// writes them at every replay though the stack may move on to other buffers.
std::vector<Tensor> backward_scratch_slots();

}  // namespace bareyolo
