// engine/backward_scratch.cpp — see backward_scratch.h.
#include "engine/backward_scratch.h"

#include <stdexcept>
#include <vector>

namespace bareyolo {

namespace {

struct ScratchStack {
  std::vector<Tensor> slots;  // flat (1, 1, 1, capacity) buffers, grow-only
  size_t depth = 0;           // slots [0, depth) are taken
};

ScratchStack& this_thread_stack() {
  thread_local ScratchStack stack;
  return stack;
}

}  // namespace

BackwardScratch::BackwardScratch() : first_slot_(this_thread_stack().depth) {}

BackwardScratch::~BackwardScratch() {
  ScratchStack& stack = this_thread_stack();
  // Frames end in the reverse order of their start (they are scoped objects of nested calls).
  if (stack.depth >= first_slot_) stack.depth = first_slot_;
}

Tensor BackwardScratch::uninitialized(Shape4 shape, const Tensor& like) {
  ScratchStack& stack = this_thread_stack();
  if (stack.depth < first_slot_)
    throw std::logic_error("BackwardScratch: an inner frame outlived this one");
  if (stack.depth == stack.slots.size()) stack.slots.emplace_back();
  Tensor& slot = stack.slots[stack.depth++];
  if (!slot.defined() || slot.numel() < shape.numel() || !(slot.device() == like.device()) ||
      slot.dtype() != like.dtype())
    slot = Tensor::empty({1, 1, 1, shape.numel()}, like.device(), like.dtype());
  return slot.prefix(shape, like.layout());
}

std::vector<Tensor> backward_scratch_slots() { return this_thread_stack().slots; }

void release_backward_scratch() {
  ScratchStack& stack = this_thread_stack();
  stack.slots.clear();
  stack.depth = 0;
}

}  // namespace bareyolo
