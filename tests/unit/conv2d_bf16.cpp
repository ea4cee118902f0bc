// tests/unit/conv2d_bf16.cpp — the bf16 convolutions' CPU definitions (kernels/ops.h): on
// bf16-valued operands each is the float convolution with its result stored in bf16 — the
// forward rounds its output, the data gradient rounds dx after adding, the weight gradient
// adds the rounded product to a float dweight — checked against that composition, bit for bit.
#include "engine/tensor.h"
#include "kernels/ops.h"
#include "tests/support/testing.h"

using namespace bareyolo;
using namespace bareyolo::testing;

namespace {

// Random values that bf16 holds.
Tensor bf16_valued(Rng& rng, Shape4 shape) {
  std::vector<float> values = random_vector<float>(rng, shape.numel(), -1, 1);
  for (float& v : values) v = round_to_bf16(v);
  return Tensor::from_vector(values, shape);
}

bool all_bf16(const Tensor& t) {
  for (float v : t.to_vector<float>())
    if (round_to_bf16(v) != v) return false;
  return true;
}

}  // namespace

TEST_CASE("bf16 convolutions on the CPU are the float ones, stored in bf16") {
  Rng rng(1605);
  const ops::Conv2dParams p{1, 1, 1, 1};
  const Shape4 xs{2, 5, 9, 7}, ws{6, 5, 3, 3}, ys{2, 6, 9, 7};
  const Tensor x = bf16_valued(rng, xs), w = bf16_valued(rng, ws), dy = bf16_valued(rng, ys);
  const std::vector<float> bias = random_vector<float>(rng, 6);

  Tensor y = Tensor::empty(ys), want = Tensor::empty(ys);
  ops::conv2d_forward_bf16(x.view<float>(), w.view<float>(), bias.data(), p, y.view<float>());
  ops::conv2d_forward<float>(x.view<float>(), w.view<float>(), bias.data(), p, want.view<float>());
  CHECK_FALSE(all_bf16(want));
  ops::round_to_bf16_in_place(want.view<float>());
  CHECK(y.to_vector<float>() == want.to_vector<float>());

  // dx starts from bf16 values (a bf16 gradient other layers added to).
  Tensor dx = bf16_valued(rng, xs), dx_want = dx.converted(DType::f32);
  ops::conv2d_backward_data_bf16(dy.view<float>(), w.view<float>(), p, dx.view<float>());
  ops::conv2d_backward_data<float>(dy.view<float>(), w.view<float>(), p, dx_want.view<float>());
  ops::round_to_bf16_in_place(dx_want.view<float>());
  CHECK(all_bf16(dx));
  CHECK(dx.to_vector<float>() == dx_want.to_vector<float>());

  // dweight is float (the arena's accumulation) and stays float; it gains the rounded product.
  const std::vector<float> start = random_vector<float>(rng, ws.numel());
  Tensor dweight = Tensor::from_vector(start, ws), product = Tensor::zeros(ws);
  std::vector<float> dbias(6, 0.5f), dbias_want(6, 0.5f);
  ops::conv2d_backward_weight_bf16(x.view<float>(), dy.view<float>(), p, dweight.view<float>(),
                                   dbias.data());
  ops::conv2d_backward_weight<float>(x.view<float>(), dy.view<float>(), p, product.view<float>(),
                                     dbias_want.data());
  CHECK_FALSE(all_bf16(product));
  const std::vector<float> got = dweight.to_vector<float>(), products = product.to_vector<float>();
  for (size_t i = 0; i < got.size(); ++i) REQUIRE(got[i] == start[i] + round_to_bf16(products[i]));
  CHECK_FALSE(all_bf16(dweight));
  CHECK(dbias == dbias_want);  // the bias gradient: float sums of dy
}
