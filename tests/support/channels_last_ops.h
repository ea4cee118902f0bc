// tests/support/channels_last_ops.h — the ops a channels-last graph runs, in sets, each set run on
// tensors made in one layout, storage and device from the same random values: the CPU's
// channels-last test (tests/unit/channels_last.cpp) checks that their results in channels last
// are their NCHW bits; the GPU's (tests/cuda/channels_last.cpp) checks its kernels, which take
// channels last as it is, against the CPU's NCHW values.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/bf16.h"
#include "kernels/ops.h"
#include "tests/support/channels_last_run.h"
#include "tests/support/random_tensor.h"

namespace bareyolo::testing {

// The host NCHW values every set reads (float; converted to a set's storage where it runs).
struct OpInputs {
  Rng rng;
  Shape4 in{2, 6, 9, 7}, out{2, 8, 5, 4};
  Tensor x = random_tensor(rng, in), weight = random_tensor(rng, {8, 6, 3, 3}, -0.3, 0.3);
  Tensor dy = random_tensor(rng, out), dx_before = random_tensor(rng, in);
  Tensor bias = random_tensor(rng, {1, 8, 1, 1});
  Tensor mean = random_tensor(rng, {1, 6, 1, 1}), gamma = random_tensor(rng, {1, 6, 1, 1});
  Tensor beta = random_tensor(rng, {1, 6, 1, 1}), invstd = random_tensor(rng, {1, 6, 1, 1}, 0.5, 2);
  Tensor running_var = random_tensor(rng, {1, 6, 1, 1}, 0.5, 2);
  Tensor dx_of_silu = random_tensor(rng, in), up = random_tensor(rng, {2, 6, 18, 14});
  Tensor concat = random_tensor(rng, {2, 11, 9, 7});
  // 16 channels: whole 16-byte vectors of float and of bf16 (a GPU's vectorised BatchNorm).
  Shape4 wide{2, 16, 5, 3};
  Tensor wide_x = random_tensor(rng, wide), wide_dy = random_tensor(rng, wide);
  Tensor wide_dx = random_tensor(rng, wide), wide_gamma = random_tensor(rng, {1, 16, 1, 1});
  Tensor wide_beta = random_tensor(rng, {1, 16, 1, 1});
  Tensor wide_mean = random_tensor(rng, {1, 16, 1, 1}, -0.5, 0.5);
  Tensor wide_var = random_tensor(rng, {1, 16, 1, 1}, 0.5, 2);

  explicit OpInputs(uint64_t seed) : rng(seed) {}
};

// A set of ops: run(layout, storage, device) returns its results (on `device`).
struct OpSet {
  std::string name;
  std::function<std::vector<Tensor>(Layout, DType, Device)> run;
};

namespace detail_ops {

// Values (host, float) in `layout`, `dtype` storage, on `device`; NaN everywhere (poisoned).
inline Tensor made(const Tensor& values, Layout layout, DType dtype, Device device) {
  return laid_out(values.converted(dtype), layout, device);
}
inline Tensor poison(Shape4 shape, Layout layout, DType dtype, Device device) {
  const std::vector<float> nan(size_t(shape.numel()), std::numeric_limits<float>::quiet_NaN());
  return made(Tensor::from_vector(nan, shape), layout, dtype, device);
}
// A fresh copy of host values on `device` (an op may change it: the running statistics).
inline Tensor fresh(const Tensor& values, Device device) {
  Tensor copy = Tensor::empty(values.shape(), device);
  copy.copy_from(values);
  return copy;
}
// Where a per-channel float tensor's values are (on its device).
inline const float* on(const Tensor& t) { return t.view<float>().data; }
inline float* on(Tensor& t) { return t.view<float>().data; }

template <class S>
View<const S> in_view(const Tensor& t) {
  return t.view<S>();
}

template <class S>
std::vector<OpSet> sets(const OpInputs& in) {
  using namespace std::string_literals;
  const ops::Conv2dParams stride2{2, 2, 1, 1}, stride1{1, 1, 1, 1};
  std::vector<OpSet> all;
  all.push_back({"convolution (stride 2, bias, moments): forward, backward data and weights",
                 [&in, stride2](Layout layout, DType dtype, Device device) {
                   const Tensor x = made(in.x, layout, dtype, device),
                                dy = made(in.dy, layout, dtype, device),
                                weight = made(in.weight, Layout::nchw, dtype, device),
                                bias = in.bias.to(device);
                   Tensor y = poison(in.out, layout, dtype, device),
                          dx = made(in.dx_before, layout, dtype, device);
                   Tensor mean = Tensor::zeros({1, 8, 1, 1}, device),
                          m2 = Tensor::zeros({1, 8, 1, 1}, device);
                   Tensor dweight = Tensor::zeros(in.weight.shape(), device),
                          dbias = Tensor::zeros({1, 8, 1, 1}, device);
                   ops::conv2d_forward<S>(in_view<S>(x), in_view<S>(weight), on(bias), stride2,
                                          y.view<S>(), on(mean), on(m2));
                   ops::conv2d_backward_data<S>(in_view<S>(dy), in_view<S>(weight), stride2,
                                                dx.view<S>());  // adds into dx's values
                   ops::conv2d_backward_weight<S>(in_view<S>(x), in_view<S>(dy), stride2,
                                                  dweight.view<float>(), on(dbias));
                   return std::vector<Tensor>{y, dx, mean, m2, dweight, dbias};
                 }});
  all.push_back({"convolution (stride 1) into a Concat's channel slice, gradients written over",
                 [&in, stride1](Layout layout, DType dtype, Device device) {
                   const Tensor x = made(in.x, layout, dtype, device);
                   const Tensor weight = made(in.weight, Layout::nchw, dtype, device);
                   Tensor concat = made(in.concat, layout, dtype, device);
                   ops::conv2d_forward<S>(in_view<S>(x), in_view<S>(weight), nullptr, stride1,
                                          concat.channels(2, 10).view<S>());
                   Tensor dx = poison(in.in, layout, dtype, device);
                   ops::conv2d_backward_data<S>(in_view<S>(concat.channels(1, 9)),
                                                in_view<S>(weight), stride1, dx.view<S>(),
                                                ops::GradientWrite::overwrite);
                   return std::vector<Tensor>{concat, dx};
                 }});
  all.push_back(
      {"fused BatchNorm + SiLU: forward, training and evaluation backward",
       [&in](Layout layout, DType dtype, Device device) {
         const Tensor x = made(in.x, layout, dtype, device),
                      dy = made(in.dx_of_silu, layout, dtype, device);
         const Tensor mean = in.mean.to(device), invstd = in.invstd.to(device),
                      gamma = in.gamma.to(device), beta = in.beta.to(device),
                      var = in.running_var.to(device);
         Tensor y = poison(in.in, layout, dtype, device), dx = poison(in.in, layout, dtype, device),
                dx_eval = poison(in.in, layout, dtype, device);
         Tensor dgamma = Tensor::zeros({1, 6, 1, 1}, device),
                dbeta = Tensor::zeros({1, 6, 1, 1}, device),
                dgamma_eval = Tensor::zeros({1, 6, 1, 1}, device),
                dbeta_eval = Tensor::zeros({1, 6, 1, 1}, device);
         ops::batchnorm_silu_apply<S>(in_view<S>(x), on(mean), on(invstd), on(gamma), on(beta),
                                      y.view<S>());
         ops::batchnorm_silu_backward_train<S>(in_view<S>(x), in_view<S>(dy), on(gamma), on(beta),
                                               on(mean), on(invstd), dx.view<S>(), on(dgamma),
                                               on(dbeta));
         ops::batchnorm_silu_backward_eval<S>(in_view<S>(x), in_view<S>(dy), on(gamma), on(beta),
                                              on(mean), on(var), {1e-3, 0.03}, dx_eval.view<S>(),
                                              on(dgamma_eval), on(dbeta_eval));
         return std::vector<Tensor>{y, dx, dx_eval, dgamma, dbeta, dgamma_eval, dbeta_eval};
       }});
  all.push_back(
      {"BatchNorm: training forward (statistics) and backward",
       [&in](Layout layout, DType dtype, Device device) {
         const Tensor x = made(in.x, layout, dtype, device),
                      dy = made(in.dx_of_silu, layout, dtype, device);
         const Tensor gamma = in.gamma.to(device), beta = in.beta.to(device);
         Tensor running_mean = fresh(in.mean, device), running_var = fresh(in.running_var, device);
         Tensor save_mean = Tensor::zeros({1, 6, 1, 1}, device),
                save_invstd = Tensor::zeros({1, 6, 1, 1}, device);
         Tensor y = poison(in.in, layout, dtype, device),
                dx = made(in.dx_before, layout, dtype, device);
         Tensor dgamma = Tensor::zeros({1, 6, 1, 1}, device),
                dbeta = Tensor::zeros({1, 6, 1, 1}, device);
         ops::batchnorm_forward_train<S>(in_view<S>(x), on(gamma), on(beta), {1e-3, 0.03},
                                         on(running_mean), on(running_var), on(save_mean),
                                         on(save_invstd), y.view<S>());
         ops::batchnorm_backward_train<S>(in_view<S>(x), in_view<S>(dy), on(gamma), on(save_mean),
                                          on(save_invstd), dx.view<S>(), on(dgamma), on(dbeta));
         return std::vector<Tensor>{y,         dx,          running_mean, running_var,
                                    save_mean, save_invstd, dgamma,       dbeta};
       }});
  all.push_back({"BatchNorm and BatchNorm + SiLU over 16 channels: training forward and backward",
                 [&in](Layout layout, DType dtype, Device device) {
                   const Shape4 per_channel{1, 16, 1, 1};
                   const Tensor x = made(in.wide_x, layout, dtype, device),
                                dy = made(in.wide_dy, layout, dtype, device);
                   const Tensor gamma = in.wide_gamma.to(device), beta = in.wide_beta.to(device);
                   Tensor running_mean = fresh(in.wide_mean, device),
                          running_var = fresh(in.wide_var, device);
                   Tensor mean = Tensor::zeros(per_channel, device),
                          invstd = Tensor::zeros(per_channel, device);
                   Tensor y = poison(in.wide, layout, dtype, device),
                          silu = poison(in.wide, layout, dtype, device),
                          dx = made(in.wide_dx, layout, dtype, device),
                          dx_silu = poison(in.wide, layout, dtype, device);
                   Tensor dgamma = Tensor::zeros(per_channel, device),
                          dbeta = Tensor::zeros(per_channel, device);
                   ops::batchnorm_forward_train<S>(in_view<S>(x), on(gamma), on(beta), {1e-3, 0.03},
                                                   on(running_mean), on(running_var), on(mean),
                                                   on(invstd), y.view<S>());
                   ops::batchnorm_silu_apply<S>(in_view<S>(x), on(mean), on(invstd), on(gamma),
                                                on(beta), silu.view<S>());
                   ops::batchnorm_backward_train<S>(in_view<S>(x), in_view<S>(dy), on(gamma),
                                                    on(mean), on(invstd), dx.view<S>(), on(dgamma),
                                                    on(dbeta));
                   ops::batchnorm_silu_backward_train<S>(in_view<S>(x), in_view<S>(dy), on(gamma),
                                                         on(beta), on(mean), on(invstd),
                                                         dx_silu.view<S>(), on(dgamma), on(dbeta));
                   return std::vector<Tensor>{y,  silu,    running_mean, running_var, mean,
                                              dx, dx_silu, dgamma,       dbeta};
                 }});
  all.push_back(
      {"SPPF's pools, upsampling, add and SiLU", [&in](Layout layout, DType dtype, Device device) {
         const Tensor x = made(in.x, layout, dtype, device);
         Tensor y1 = poison(in.in, layout, dtype, device),
                y2 = poison(in.in, layout, dtype, device),
                y3 = poison(in.in, layout, dtype, device);
         ops::maxpool2d_chain3_forward<S>(in_view<S>(x), {5, 1, 2}, y1.view<S>(), y2.view<S>(),
                                          y3.view<S>());
         Tensor dpool = made(in.dx_before, layout, dtype, device);
         ops::maxpool2d_backward<S>(in_view<S>(x), in_view<S>(y1), {5, 1, 2}, dpool.view<S>());
         Tensor upsampled = poison(in.up.shape(), layout, dtype, device),
                dsmall = poison(in.in, layout, dtype, device);
         ops::upsample_nearest2x_forward<S>(in_view<S>(x), upsampled.view<S>());
         ops::upsample_nearest2x_backward<S>(in_view<S>(made(in.up, layout, dtype, device)),
                                             dsmall.view<S>(), ops::GradientWrite::overwrite);
         Tensor sum = poison(in.in, layout, dtype, device),
                dsilu = made(in.dx_before, layout, dtype, device),
                silu = poison(in.in, layout, dtype, device);
         ops::add_forward<S>(in_view<S>(x), in_view<S>(y3), sum.view<S>());
         ops::silu_forward<S>(in_view<S>(sum), silu.view<S>());
         ops::silu_backward<S>(in_view<S>(x), in_view<S>(y1), dsilu.view<S>());
         return std::vector<Tensor>{y1, y2, y3, dpool, upsampled, dsmall, sum, silu, dsilu};
       }});
  return all;
}

}  // namespace detail_ops

// Every set, each running in the storage it is asked for (float or bf16).
inline std::vector<OpSet> channels_last_op_sets(const OpInputs& in) {
  std::vector<OpSet> sets = detail_ops::sets<float>(in);
  const std::vector<OpSet> narrow = detail_ops::sets<bf16>(in);
  for (size_t k = 0; k < sets.size(); ++k)
    sets[k].run = [wide = sets[k].run, narrow = narrow[k].run](Layout layout, DType dtype,
                                                               Device device) {
      return dtype == DType::bf16 ? narrow(layout, dtype, device) : wide(layout, dtype, device);
    };
  return sets;
}

// Whether any value of the results is NaN: an output an op left unwritten (they are poisoned).
inline int64_t nan_count(const std::vector<Tensor>& results) {
  int64_t nan = 0;
  for (const Tensor& t : results)
    for (double v : t.to_doubles()) nan += std::isnan(v);
  return nan;
}

// The largest norm-wise relative difference between two runs' results, over the tensors.
inline double worst_relative_difference(const std::vector<Tensor>& a,
                                        const std::vector<Tensor>& b) {
  REQUIRE(a.size() == b.size());
  double worst = 0;
  for (size_t k = 0; k < a.size(); ++k) {
    const std::vector<double> u = a[k].to_doubles(), v = b[k].to_doubles();
    REQUIRE(u.size() == v.size());
    double diff = 0, norm = 0;
    for (size_t i = 0; i < u.size(); ++i) {
      diff += (u[i] - v[i]) * (u[i] - v[i]);
      norm += u[i] * u[i];
    }
    worst = std::max(worst, std::sqrt(diff / std::max(norm, 1e-30)));
  }
  return worst;
}

}  // namespace bareyolo::testing
