// tests/unit/bf16_ops.cpp — the activation ops on bf16 views (mixed precision; kernels/ops.h):
// each is its float op on the widened operands with every stored result rounded to bf16, and
// every per-channel value float. Each op runs twice on the same random bf16 values — on bf16
// tensors, and on their float copies — and the bf16 results must equal the float ones rounded
// to bf16, bit for bit. Operands are channel slices of larger tensors (a batch stride beyond
// their size, as Concat's producers write) whose other channels must come back untouched, and
// results an op writes start as NaN: a missed or misplaced store shows.
#include <cmath>
#include <cstring>
#include <functional>

#include "engine/tensor.h"
#include "kernels/ops.h"
#include "tests/support/testing.h"

using namespace bareyolo;
using namespace bareyolo::testing;

namespace {

enum class Role { input, accumulated, written };

// An operand is channels [1, 1 + c) of a tensor with two more channels, or a dense tensor of its
// own (a convolution's weights).
constexpr bool kDense = true;
struct Operand {
  Shape4 shape;
  Role role = Role::input;
  bool dense = false;
};

// The operands of one run: the tensors they live in and the views the op gets.
struct Operands {
  std::vector<Tensor> parents, views;
};

// bf16 operands with random values in [-2, 2) (the written ones NaN), every value bf16 holds.
Operands bf16_operands(const std::vector<Operand>& operands, Rng& rng) {
  Operands out;
  for (const Operand& operand : operands) {
    Shape4 parent = operand.shape;
    if (!operand.dense) parent.c += 2;
    std::vector<float> values = random_vector<float>(rng, parent.numel(), -2, 2);
    Tensor whole = Tensor::from_vector(values, parent).converted(DType::bf16);
    Tensor view = operand.dense ? whole : whole.channels(1, 1 + operand.shape.c);
    if (operand.role == Role::written)
      view.convert_from(Tensor::from_vector(
          std::vector<float>(size_t(operand.shape.numel()), std::nanf("")), operand.shape));
    out.parents.push_back(whole);
    out.views.push_back(view);
  }
  return out;
}

// The same operands as float tensors (exact copies).
Operands widened(const Operands& bf16s, const std::vector<Operand>& operands) {
  Operands out;
  for (size_t k = 0; k < operands.size(); ++k) {
    Tensor whole = bf16s.parents[k].converted(DType::f32);
    out.parents.push_back(whole);
    out.views.push_back(operands[k].dense ? whole : whole.channels(1, 1 + operands[k].shape.c));
  }
  return out;
}

std::vector<uint16_t> bits(const Tensor& t) {
  std::vector<uint16_t> out;
  for (bf16 v : t.to_vector<bf16>()) out.push_back(v.bits);
  return out;
}

bool has_nan(const Tensor& t) {
  for (double v : t.to_doubles())
    if (std::isnan(v)) return true;
  return false;
}

// Runs op.template operator()<T>(views, channel_values) with T = bf16 and T = float on the
// same values (`channel_values`: per-channel floats the op reads and writes, `channel_count`
// of them drawn in [0.5, 1.5)), then checks the bf16 run against the float one: every operand's
// whole tensor equals the float one rounded to bf16, nothing is NaN, and the per-channel floats
// are equal.
template <class Op>
void check_against_float(const std::vector<Operand>& operands, int64_t channel_count, Op op) {
  Rng rng(1606);
  Operands ours = bf16_operands(operands, rng);
  Operands reference = widened(ours, operands);
  std::vector<float> channel_values = random_vector<float>(rng, channel_count, 0.5, 1.5);
  std::vector<float> reference_channel_values = channel_values;
  op.template operator()<bf16>(ours.views, channel_values.data());
  op.template operator()<float>(reference.views, reference_channel_values.data());
  for (size_t k = 0; k < operands.size(); ++k) {
    INFO("operand " << k);
    CHECK_FALSE(has_nan(ours.parents[k]));
    CHECK(bits(ours.parents[k]) == bits(reference.parents[k].converted(DType::bf16)));
  }
  CHECK(channel_values == reference_channel_values);
}

}  // namespace

TEST_CASE("bf16 elementwise, shape and pooling ops are their float ops stored in bf16") {
  const Shape4 s{2, 3, 6, 5}, small{2, 3, 3, 4}, large{2, 3, 6, 8};
  const Role in = Role::input, add = Role::accumulated, out = Role::written;
  check_against_float({{s, in}, {s, out}}, 0, []<class T>(std::vector<Tensor>& v, float*) {
    ops::silu_forward<T>(v[0].view<T>(), v[1].view<T>());
  });
  check_against_float({{s, in}, {s, in}, {s, add}}, 0, []<class T>(std::vector<Tensor>& v, float*) {
    ops::silu_backward<T>(v[0].view<T>(), v[1].view<T>(), v[2].view<T>());
  });
  check_against_float({{s, in}, {s, in}, {s, out}}, 0, []<class T>(std::vector<Tensor>& v, float*) {
    ops::add_forward<T>(v[0].view<T>(), v[1].view<T>(), v[2].view<T>());
  });
  check_against_float({{s, in}, {s, add}, {s, add}}, 0,
                      []<class T>(std::vector<Tensor>& v, float*) {
                        ops::add_backward<T>(v[0].view<T>(), v[1].view<T>(), v[2].view<T>());
                      });
  check_against_float({{small, in}, {large, out}}, 0, []<class T>(std::vector<Tensor>& v, float*) {
    ops::upsample_nearest2x_forward<T>(v[0].view<T>(), v[1].view<T>());
  });
  check_against_float({{large, in}, {small, add}}, 0, []<class T>(std::vector<Tensor>& v, float*) {
    ops::upsample_nearest2x_backward<T>(v[0].view<T>(), v[1].view<T>());
  });
  const ops::Pool2dParams pool{5, 1, 2};
  check_against_float({{s, in}, {s, out}}, 0, [&]<class T>(std::vector<Tensor>& v, float*) {
    ops::maxpool2d_forward<T>(v[0].view<T>(), pool, v[1].view<T>());
  });
  check_against_float(
      {{s, in}, {s, in}, {s, add}}, 0, [&]<class T>(std::vector<Tensor>& v, float*) {
        ops::maxpool2d_backward<T>(v[0].view<T>(), v[1].view<T>(), pool, v[2].view<T>());
      });
  check_against_float({{s, in}, {s, out}, {s, out}, {s, out}}, 0,
                      [&]<class T>(std::vector<Tensor>& v, float*) {
                        ops::maxpool2d_chain3_forward<T>(v[0].view<T>(), pool, v[1].view<T>(),
                                                         v[2].view<T>(), v[3].view<T>());
                      });
  const Shape4 two{2, 2, 6, 5}, five{2, 5, 6, 5};
  check_against_float({{s, in}, {two, in}, {five, out}}, 0,
                      []<class T>(std::vector<Tensor>& v, float*) {
                        ops::concat_forward<T>({v[0].view<T>(), v[1].view<T>()}, v[2].view<T>());
                      });
  check_against_float({{five, in}, {s, add}, {two, add}}, 0,
                      []<class T>(std::vector<Tensor>& v, float*) {
                        ops::concat_backward<T>(v[0].view<T>(), {v[1].view<T>(), v[2].view<T>()});
                      });
}

// The per-channel floats of the BatchNorm cases, C values each at these offsets: mean, invstd,
// gamma, beta, then sums or running statistics (read, or written by the op), then dgamma, dbeta.
TEST_CASE("bf16 BatchNorm and BatchNorm + SiLU ops are their float ops stored in bf16") {
  const Shape4 s{3, 4, 5, 6};
  const int64_t C = s.c;
  const Role in = Role::input, add = Role::accumulated, out = Role::written;
  const ops::BatchNormParams p{1e-3, 0.03};
  auto mean = [](float* f) { return f; };
  auto invstd = [C](float* f) { return f + C; };
  auto gamma = [C](float* f) { return f + 2 * C; };
  auto beta = [C](float* f) { return f + 3 * C; };
  auto first = [C](float* f) { return f + 4 * C; };   // sum_dy, or running_mean
  auto second = [C](float* f) { return f + 5 * C; };  // sum_dy_xhat, or running_var
  auto dgamma = [C](float* f) { return f + 6 * C; };
  auto dbeta = [C](float* f) { return f + 7 * C; };
  const int64_t n = 8 * C;
  const int64_t count = s.n * s.plane();

  check_against_float({{s, in}}, n, [&]<class T>(std::vector<Tensor>& v, float* f) {
    ops::batchnorm_moments<T>(v[0].view<T>(), mean(f), second(f));
  });
  check_against_float({{s, in}, {s, out}}, n, [&]<class T>(std::vector<Tensor>& v, float* f) {
    ops::batchnorm_apply<T>(v[0].view<T>(), mean(f), invstd(f), gamma(f), beta(f), v[1].view<T>());
  });
  check_against_float({{s, in}, {s, in}}, n, [&]<class T>(std::vector<Tensor>& v, float* f) {
    ops::batchnorm_backward_reduce<T>(v[0].view<T>(), v[1].view<T>(), mean(f), invstd(f), first(f),
                                      second(f));
  });
  check_against_float(
      {{s, in}, {s, in}, {s, add}}, n, [&]<class T>(std::vector<Tensor>& v, float* f) {
        ops::batchnorm_backward_apply<T>(v[0].view<T>(), v[1].view<T>(), mean(f), invstd(f),
                                         gamma(f), first(f), second(f), count, v[2].view<T>());
      });
  check_against_float({{s, in}, {s, out}}, n, [&]<class T>(std::vector<Tensor>& v, float* f) {
    ops::batchnorm_forward_train<T>(v[0].view<T>(), gamma(f), beta(f), p, first(f), second(f),
                                    mean(f), invstd(f), v[1].view<T>());
  });
  check_against_float({{s, in}}, n, [&]<class T>(std::vector<Tensor>& v, float* f) {
    ops::batchnorm_train_statistics<T>(v[0].view<T>(), p, first(f), second(f), mean(f), invstd(f));
  });
  check_against_float(
      {{s, in}, {s, in}, {s, add}}, n, [&]<class T>(std::vector<Tensor>& v, float* f) {
        ops::batchnorm_backward_train<T>(v[0].view<T>(), v[1].view<T>(), gamma(f), mean(f),
                                         invstd(f), v[2].view<T>(), dgamma(f), dbeta(f));
      });
  check_against_float({{s, in}, {s, out}}, n, [&]<class T>(std::vector<Tensor>& v, float* f) {
    ops::batchnorm_forward_eval<T>(v[0].view<T>(), gamma(f), beta(f), first(f), second(f), p,
                                   v[1].view<T>());
  });
  check_against_float(
      {{s, in}, {s, in}, {s, add}}, n, [&]<class T>(std::vector<Tensor>& v, float* f) {
        ops::batchnorm_backward_eval<T>(v[0].view<T>(), v[1].view<T>(), gamma(f), first(f),
                                        second(f), p, v[2].view<T>(), dgamma(f), dbeta(f));
      });
  check_against_float({{s, in}, {s, out}}, n, [&]<class T>(std::vector<Tensor>& v, float* f) {
    ops::batchnorm_silu_apply<T>(v[0].view<T>(), mean(f), invstd(f), gamma(f), beta(f),
                                 v[1].view<T>());
  });
  // The fused backward ops write dx. SyncBatchNorm's two phases pass dx between them (ops.h),
  // so they run as a pair: reduce's sums, then apply with them (the one-rank case).
  check_against_float(
      {{s, in}, {s, in}, {s, out}}, n, [&]<class T>(std::vector<Tensor>& v, float* f) {
        ops::batchnorm_silu_backward_reduce<T>(v[0].view<T>(), v[1].view<T>(), mean(f), invstd(f),
                                               gamma(f), beta(f), first(f), second(f),
                                               v[2].view<T>());
        ops::batchnorm_silu_backward_apply<T>(v[0].view<T>(), v[1].view<T>(), mean(f), invstd(f),
                                              gamma(f), beta(f), first(f), second(f), count,
                                              v[2].view<T>());
      });
  check_against_float({{s, in}, {s, in}, {s, out}}, n,
                      [&]<class T>(std::vector<Tensor>& v, float* f) {
                        ops::batchnorm_silu_backward_train<T>(v[0].view<T>(), v[1].view<T>(),
                                                              gamma(f), beta(f), mean(f), invstd(f),
                                                              v[2].view<T>(), dgamma(f), dbeta(f));
                      });
  check_against_float(
      {{s, in}, {s, in}, {s, out}}, n, [&]<class T>(std::vector<Tensor>& v, float* f) {
        ops::batchnorm_silu_backward_eval<T>(v[0].view<T>(), v[1].view<T>(), gamma(f), beta(f),
                                             first(f), second(f), p, v[2].view<T>(), dgamma(f),
                                             dbeta(f));
      });
}

// The convolutions' definitions (ops.h): y and dx as the float op stored in bf16; moments of the
// stored y; the weight gradient adds the product rounded to bf16 into a float dweight.
TEST_CASE("bf16 convolutions are the float ones stored in bf16") {
  const ops::Conv2dParams p{1, 1, 1, 1};
  const Shape4 xs{2, 5, 9, 7}, ws{6, 5, 3, 3}, ys{2, 6, 9, 7};
  const Role in = Role::input, add = Role::accumulated;
  // dx starts from bf16 values (a gradient other layers added to).
  check_against_float(
      {{ys, in}, {ws, in, kDense}, {xs, add}}, 0, [&]<class T>(std::vector<Tensor>& v, float*) {
        ops::conv2d_backward_data<T>(v[0].view<T>(), v[1].view<T>(), p, v[2].view<T>());
      });
  // Forward with a bias, and the moments of what it stored.
  check_against_float({{xs, in}, {ws, in, kDense}, {ys, Role::written}}, 6,
                      [&]<class T>(std::vector<Tensor>& v, float* bias) {
                        ops::conv2d_forward<T>(v[0].view<T>(), v[1].view<T>(), bias, p,
                                               v[2].view<T>());
                      });
  Rng rng(1607);
  Operands ours = bf16_operands({{xs, in}, {ws, in, kDense}, {ys, Role::written}}, rng);
  std::vector<float> bias = random_vector<float>(rng, 6), mean(6), m2(6), want_mean(6), want_m2(6);
  ops::conv2d_forward<bf16>(ours.views[0].view<bf16>(), ours.views[1].view<bf16>(), bias.data(), p,
                            ours.views[2].view<bf16>(), mean.data(), m2.data());
  ops::batchnorm_moments<bf16>(ours.views[2].view<bf16>(), want_mean.data(), want_m2.data());
  CHECK(mean == want_mean);
  CHECK(m2 == want_m2);

  // dweight is float (the arena's accumulation) and gains the rounded product; dbias float sums.
  Operands grads = bf16_operands({{xs, in}, {ys, in}}, rng);
  const std::vector<float> start = random_vector<float>(rng, ws.numel());
  Tensor dweight = Tensor::from_vector(start, ws), product = Tensor::zeros(ws);
  std::vector<float> dbias(6, 0.5f), dbias_want(6, 0.5f);
  ops::conv2d_backward_weight<bf16>(grads.views[0].view<bf16>(), grads.views[1].view<bf16>(), p,
                                    dweight.view<float>(), dbias.data());
  const Tensor x = grads.views[0].converted(DType::f32), dy = grads.views[1].converted(DType::f32);
  ops::conv2d_backward_weight<float>(x.view<float>(), dy.view<float>(), p, product.view<float>(),
                                     dbias_want.data());
  const std::vector<float> got = dweight.to_vector<float>(), products = product.to_vector<float>();
  int64_t rounded = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    REQUIRE(got[i] == start[i] + round_to_bf16(products[i]));
    rounded += round_to_bf16(products[i]) != products[i];
  }
  CHECK(rounded > ws.numel() / 2);  // the rounding is there to see
  CHECK(dbias == dbias_want);
}
