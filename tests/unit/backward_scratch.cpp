// tests/unit/backward_scratch.cpp — the stack of gradient buffers a backward holds only while it
// runs: nested frames stack on their parent's, a finished frame's slots are reused by the next
// frame at the same depth as they were (no zeroing pass), and a slot changes dtype when asked.
#include "engine/backward_scratch.h"
#include "tests/support/testing.h"

using namespace bareyolo;

TEST_CASE("backward scratch stacks nested frames and reuses a finished frame's slots") {
  release_backward_scratch();
  const Tensor like = Tensor::zeros({1, 1, 1, 1});
  const void* outer_slot = nullptr;
  const void* inner_slot = nullptr;
  {
    BackwardScratch outer;
    Tensor a = outer.uninitialized({2, 3, 4, 5}, like);
    outer_slot = a.storage()->data();
    a.copy_from(Tensor::from_vector(std::vector<float>(a.numel(), 7.0f), a.shape()));
    {
      BackwardScratch inner;
      Tensor b = inner.uninitialized({1, 2, 3, 4}, like);
      inner_slot = b.storage()->data();
      CHECK(inner_slot != outer_slot);  // the parent's buffer is still in use
    }
    {
      BackwardScratch sibling;  // the same depth as `inner`, after it: its slot again
      Tensor c = sibling.uninitialized({1, 2, 3, 3}, like);
      CHECK(c.storage()->data() == inner_slot);
    }
    for (float v : a.to_vector<float>()) CHECK(v == 7.0f);  // untouched by the inner frames
  }
  {
    BackwardScratch next;  // depth 0 again: the slot as `a` left it
    Tensor d = next.uninitialized({2, 3, 4, 5}, like);
    CHECK(d.storage()->data() == outer_slot);
    for (float v : d.to_vector<float>()) CHECK(v == 7.0f);
    Tensor e =
        next.uninitialized({1, 1, 2, 2}, Tensor::zeros({1, 1, 1, 1}, Device::cpu(), DType::f64));
    CHECK(e.dtype() == DType::f64);
  }
  release_backward_scratch();
}
