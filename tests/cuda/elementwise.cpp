// tests/cuda/elementwise.cpp — SiLU and add on the GPU (kernels/cuda/elementwise.cu) against the
// CPU, float and bf16, on the shapes that pick each of launch_elementwise's paths: whole 16-byte
// vectors; vectors and a tail of single elements (45 elements: 1 past 11 float vectors, 5 past 5
// bf16 ones); fewer elements than a vector; channel slices of one image (packed, but 35 elements
// past an aligned start: element by element), whose neighbours must keep their values; and one
// gradient for both inputs of an add (y = x + x), which takes dy twice. Outputs are poisoned
// first; the backward adds into random starting gradients.
#include <cstdint>
#include <vector>

#include "kernels/ops.h"
#include "tests/support/channels_last_ops.h"
#include "tests/support/channels_last_run.h"
#include "tests/support/random_tensor.h"

using namespace bareyolo;
using namespace bareyolo::testing;

namespace {

// The four ops on channels [1, 4) of x, dy and the outputs (whole tensors when `slice` is
// false), in `dtype` storage on `device`; their results as the CPU reads them: the gradients
// whole (neighbours of a slice included), the poisoned outputs where written.
std::vector<Tensor> run_ops(const std::vector<Tensor>& values, bool slice, DType dtype,
                            Device device) {
  std::vector<Tensor> on;  // x, b, dy, dx, da, db, then two poisoned outputs
  for (const Tensor& v : values) on.push_back(laid_out(v.converted(dtype), Layout::nchw, device));
  for (int k = 0; k < 2; ++k)
    on.push_back(
        laid_out(poisoned(values[0].shape(), Layout::nchw).converted(dtype), Layout::nchw, device));
  auto part = [&](Tensor& t) { return slice ? t.channels(1, 4) : t; };
  Tensor x = part(on[0]), b = part(on[1]), dy = part(on[2]), dx = part(on[3]), da = part(on[4]),
         db = part(on[5]), silu_y = part(on[6]), sum = part(on[7]);
  Tensor both = on[1];  // b's values: the one gradient of y = x + x
  auto run = [&]<class S>() {
    ops::silu_forward<S>(x.view<S>(), silu_y.view<S>());
    ops::silu_backward<S>(x.view<S>(), dy.view<S>(), dx.view<S>());
    ops::add_forward<S>(x.view<S>(), b.view<S>(), sum.view<S>());
    ops::add_backward<S>(dy.view<S>(), da.view<S>(), db.view<S>());
    if (!slice) ops::add_backward<S>(dy.view<S>(), both.view<S>(), both.view<S>());
  };
  if (dtype == DType::bf16)
    run.operator()<bf16>();
  else
    run.operator()<float>();
  std::vector<Tensor> results = {silu_y, sum, on[3], on[4], on[5]};
  if (!slice) results.push_back(both);
  for (Tensor& t : results) t = t.converted(DType::f32);
  return results;
}

}  // namespace

TEST_CASE("cuda elementwise: SiLU and add in 16-byte vectors, tails and unaligned slices") {
  Rng rng(93);
  for (Shape4 shape :
       {Shape4{2, 16, 4, 8}, Shape4{1, 3, 3, 5}, Shape4{1, 1, 1, 5}, Shape4{1, 5, 5, 7}}) {
    std::vector<Tensor> values;
    for (int k = 0; k < 6; ++k) values.push_back(random_tensor(rng, shape, -3, 3));
    const bool slice = shape.c == 5;  // channels 1-3: starts 35 elements in
    for (DType dtype : {DType::f32, DType::bf16}) {
      INFO(shape.str() << (slice ? " sliced" : "") << ", " << dtype_name(dtype));
      const std::vector<Tensor> cpu = run_ops(values, slice, dtype, Device::cpu()),
                                gpu = run_ops(values, slice, dtype, Device::cuda(0));
      CHECK(nan_count(gpu) == 0);
      // Float: SiLU's exponential differs by an ulp or so; bf16: a result may round one step
      // (2^-8 relative) apart.
      CHECK(worst_relative_difference(cpu, gpu) < (dtype == DType::f32 ? 1e-5 : 1e-2));
    }
  }
}
