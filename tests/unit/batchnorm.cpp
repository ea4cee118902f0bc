// tests/unit/batchnorm.cpp — batch normalisation: moments, train and eval forwards and the
// running statistics against their formulas, both backwards against finite differences
// (double) and float against double, the phase ops composed by hand against the train ops they
// make up (the composition SyncBatchNorm relies on), and the fused BatchNorm + SiLU ops
// against finite differences of SiLU(BN(x)) and, bit for bit, against their composition.
#include <cmath>
#include <limits>
#include <stdexcept>
#include <type_traits>

#include "kernels/ops.h"
#include "tests/support/testing.h"

using namespace bareyolo;
using namespace bareyolo::testing;

namespace {

// Odd sizes, batch 1, a 1-wide image; all with at least two values per channel.
const std::vector<Shape4> kShapes = {{2, 3, 4, 5}, {1, 4, 3, 3}, {3, 2, 5, 1}, {4, 5, 2, 3}};
const ops::BatchNormParams kParams{1e-4, 0.1};  // not the defaults: both must be used

int64_t gap_of(size_t shape_index) { return shape_index % 2 ? 0 : 6; }

// Per-channel statistics, written out directly from dense values.
struct ChannelMoments {
  std::vector<double> mean, m2;
};
ChannelMoments naive_moments(const std::vector<double>& x, Shape4 s) {
  ChannelMoments m{std::vector<double>(s.c, 0.0), std::vector<double>(s.c, 0.0)};
  const double count = static_cast<double>(s.n * s.h * s.w);
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t c = 0; c < s.c; ++c)
      for (int64_t j = 0; j < s.plane(); ++j) m.mean[c] += x[(n * s.c + c) * s.plane() + j] / count;
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t c = 0; c < s.c; ++c)
      for (int64_t j = 0; j < s.plane(); ++j)
        m.m2[c] += std::pow(x[(n * s.c + c) * s.plane() + j] - m.mean[c], 2);
  return m;
}

// y = (x - mean[c]) * invstd[c] * gamma[c] + beta[c] on dense values.
std::vector<double> normalise(const std::vector<double>& x, Shape4 s,
                              const std::vector<double>& mean, const std::vector<double>& invstd,
                              const std::vector<double>& gamma, const std::vector<double>& beta) {
  std::vector<double> y(x.size());
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t c = 0; c < s.c; ++c)
      for (int64_t j = 0; j < s.plane(); ++j) {
        const int64_t at = (n * s.c + c) * s.plane() + j;
        y[at] = (x[at] - mean[c]) * invstd[c] * gamma[c] + beta[c];
      }
  return y;
}

// StridedBuffer::seeded, with every value moved by `offset` (real activations' means are
// not zero).
template <class T>
StridedBuffer<T> seeded_buffer(Shape4 shape, int64_t gap, uint64_t seed, double offset = 0) {
  StridedBuffer<T> buffer = StridedBuffer<T>::seeded(shape, gap, seed);
  for (T& v : buffer.storage) v = static_cast<T>(v + offset);
  return buffer;
}

template <class T>
constexpr double tolerance() {
  return std::is_same_v<T, float> ? 2e-5 : 1e-12;
}

// Per-channel parameters of one test: gamma, beta, and running statistics (var > 0).
struct ChannelParams {
  std::vector<double> gamma, beta, running_mean, running_var;
};
ChannelParams random_channel_params(Rng& rng, int64_t channels) {
  return {random_vector(rng, channels, 0.5, 1.5), random_vector(rng, channels),
          random_vector(rng, channels), random_vector(rng, channels, 0.2, 2.0)};
}

}  // namespace

TEST_CASE_TEMPLATE("batchnorm moments match a naive two-pass computation", T, float, double) {
  for (size_t k = 0; k < kShapes.size(); ++k) {
    CAPTURE(k);
    StridedBuffer<T> x = seeded_buffer<T>(kShapes[k], gap_of(k), 200 + k, 3.0);
    std::vector<T> mean(kShapes[k].c), m2(kShapes[k].c);
    ops::batchnorm_moments<T>(x.view(), mean.data(), m2.data());
    ChannelMoments expected = naive_moments(x.values(), kShapes[k]);
    check_close(mean, expected.mean, tolerance<T>(), tolerance<T>(), "batchnorm mean");
    check_close(m2, expected.m2, tolerance<T>(), tolerance<T>(), "batchnorm M2");
  }
}

TEST_CASE_TEMPLATE("batchnorm forward_train matches the formula and updates running stats", T,
                   float, double) {
  Rng rng(201);
  for (size_t k = 0; k < kShapes.size(); ++k) {
    CAPTURE(k);
    const Shape4 s = kShapes[k];
    StridedBuffer<T> x = seeded_buffer<T>(s, gap_of(k), 210 + k, 2.0);
    StridedBuffer<T> y(s, gap_of(k + 1), rng);
    y.poison();
    ChannelParams cp = random_channel_params(rng, s.c);
    std::vector<T> gamma = convert<T>(cp.gamma), beta = convert<T>(cp.beta);
    std::vector<T> running_mean = convert<T>(cp.running_mean);
    std::vector<T> running_var = convert<T>(cp.running_var);
    std::vector<T> save_mean(s.c), save_invstd(s.c);
    ops::batchnorm_forward_train<T>(x.view(), gamma.data(), beta.data(), kParams,
                                    running_mean.data(), running_var.data(), save_mean.data(),
                                    save_invstd.data(), y.view());

    const double count = static_cast<double>(s.n * s.h * s.w), m = kParams.momentum;
    ChannelMoments moments = naive_moments(x.values(), s);
    std::vector<double> invstd(s.c), expected_running_mean(s.c), expected_running_var(s.c);
    for (int64_t c = 0; c < s.c; ++c) {
      invstd[c] = 1 / std::sqrt(moments.m2[c] / count + kParams.eps);
      expected_running_mean[c] = (1 - m) * cp.running_mean[c] + m * moments.mean[c];
      expected_running_var[c] = (1 - m) * cp.running_var[c] + m * moments.m2[c] / (count - 1);
    }
    const double tol = tolerance<T>();
    check_close(save_mean, moments.mean, tol, tol, "batchnorm save_mean");
    check_close(save_invstd, invstd, tol, tol, "batchnorm save_invstd");
    check_close(running_mean, expected_running_mean, tol, tol, "batchnorm running_mean");
    check_close(running_var, expected_running_var, tol, tol, "batchnorm running_var");
    check_close(y.values(),
                normalise(x.values(), s, moments.mean, invstd, convert<double>(gamma),
                          convert<double>(beta)),
                tol, tol, "batchnorm train y");
  }
}

TEST_CASE_TEMPLATE("batchnorm forward_eval matches the formula", T, float, double) {
  Rng rng(202);
  for (size_t k = 0; k < kShapes.size(); ++k) {
    CAPTURE(k);
    const Shape4 s = kShapes[k];
    StridedBuffer<T> x(s, gap_of(k), rng), y(s, gap_of(k + 1), rng);
    y.poison();
    ChannelParams cp = random_channel_params(rng, s.c);
    std::vector<T> gamma = convert<T>(cp.gamma), beta = convert<T>(cp.beta);
    std::vector<T> running_mean = convert<T>(cp.running_mean);
    std::vector<T> running_var = convert<T>(cp.running_var);
    ops::batchnorm_forward_eval<T>(x.view(), gamma.data(), beta.data(), running_mean.data(),
                                   running_var.data(), kParams, y.view());
    std::vector<double> invstd(s.c);
    for (int64_t c = 0; c < s.c; ++c)
      invstd[c] = 1 / std::sqrt(static_cast<double>(running_var[c]) + kParams.eps);
    check_close(y.values(),
                normalise(x.values(), s, convert<double>(running_mean), invstd,
                          convert<double>(gamma), convert<double>(beta)),
                tolerance<T>(), tolerance<T>(), "batchnorm eval y");
  }
}

namespace {

enum class Mode { train, eval };

// y = batchnorm(x) in `mode`; the running statistics are inputs in eval mode and scratch
// (updated, then discarded) in train mode.
std::vector<double> batchnorm_forward(Mode mode, const std::vector<double>& x, Shape4 s,
                                      const ChannelParams& cp, const std::vector<double>& gamma,
                                      const std::vector<double>& beta) {
  std::vector<double> y(x.size()), running_mean = cp.running_mean, running_var = cp.running_var;
  std::vector<double> save_mean(s.c), save_invstd(s.c);
  View<const double> xv = dense_view(x.data(), s);
  if (mode == Mode::train)
    ops::batchnorm_forward_train<double>(xv, gamma.data(), beta.data(), kParams,
                                         running_mean.data(), running_var.data(), save_mean.data(),
                                         save_invstd.data(), dense_view(y.data(), s));
  else
    ops::batchnorm_forward_eval<double>(xv, gamma.data(), beta.data(), running_mean.data(),
                                        running_var.data(), kParams, dense_view(y.data(), s));
  return y;
}

// Adds dx, dgamma, dbeta of `mode` for x, dy in precision T (x, dy, dx may be strided).
template <class T>
void batchnorm_backward(Mode mode, View<const T> x, View<const T> dy, const ChannelParams& cp,
                        View<T> dx, T* dgamma, T* dbeta) {
  const int64_t channels = x.shape.c;
  std::vector<T> gamma = convert<T>(cp.gamma), running_mean = convert<T>(cp.running_mean),
                 running_var = convert<T>(cp.running_var);
  if (mode == Mode::eval) {
    ops::batchnorm_backward_eval<T>(x, dy, gamma.data(), running_mean.data(), running_var.data(),
                                    kParams, dx, dgamma, dbeta);
    return;
  }
  std::vector<T> beta(channels), save_mean(channels), save_invstd(channels);
  std::vector<T> y(static_cast<size_t>(x.shape.numel()));
  ops::batchnorm_forward_train<T>(x, gamma.data(), beta.data(), kParams, running_mean.data(),
                                  running_var.data(), save_mean.data(), save_invstd.data(),
                                  dense_view(y.data(), x.shape));
  ops::batchnorm_backward_train<T>(x, dy, gamma.data(), save_mean.data(), save_invstd.data(), dx,
                                   dgamma, dbeta);
}

// The finite-difference check of an op shaped like batchnorm, in both modes and on every
// shape: forward(mode, x, s, cp) gives y, backward(mode, x, s, cp, dy, d) adds {dx, dgamma,
// dbeta} into d.
template <class Forward, class Backward>
void check_channel_op_gradients(uint64_t seed, const Forward& forward, const Backward& backward) {
  Rng rng(seed);
  for (Mode mode : {Mode::train, Mode::eval})
    for (size_t k = 0; k < kShapes.size(); ++k) {
      CAPTURE(k);
      CAPTURE(mode == Mode::train);
      const Shape4 s = kShapes[k];
      std::vector<double> x = random_vector(rng, s.numel(), -1.0, 3.0);
      ChannelParams cp = random_channel_params(rng, s.c);
      GradCheck check;
      check.inputs = {&x, &cp.gamma, &cp.beta};
      check.names = {"x", "gamma", "beta"};
      check.max_checks_per_input = 80;
      check.forward = [&] { return forward(mode, x, s, cp); };
      check.backward = [&](const std::vector<double>& dy, std::vector<std::vector<double>>& d) {
        backward(mode, x, s, cp, dy, d);
      };
      check.run(rng);
    }
}

}  // namespace

TEST_CASE("batchnorm train and eval backward pass the gradient check") {
  check_channel_op_gradients(
      203,
      [](Mode mode, const std::vector<double>& x, Shape4 s, const ChannelParams& cp) {
        return batchnorm_forward(mode, x, s, cp, cp.gamma, cp.beta);
      },
      [](Mode mode, const std::vector<double>& x, Shape4 s, const ChannelParams& cp,
         const std::vector<double>& dy, std::vector<std::vector<double>>& d) {
        batchnorm_backward<double>(mode, dense_view(x.data(), s), dense_view(dy.data(), s), cp,
                                   dense_view(d[0].data(), s), d[1].data(), d[2].data());
      });
}

namespace {

// SiLU of batchnorm(x) (ConvBnSilu's BN and SiLU), written out in double.
std::vector<double> batchnorm_silu_forward(Mode mode, const std::vector<double>& x, Shape4 s,
                                           const ChannelParams& cp,
                                           const std::vector<double>& gamma,
                                           const std::vector<double>& beta) {
  std::vector<double> y = batchnorm_forward(mode, x, s, cp, gamma, beta);
  for (double& v : y) v = v / (1 + std::exp(-v));
  return y;
}

// The fused backward ops: dx, dgamma, dbeta added for x, dy (SiLU's output gradient) in
// `mode` (the ops write dx, into a NaN-poisoned buffer here, then added to the checker's d[0]);
// in training both the one-call op and SyncBN's two phases (reduce, then apply with the
// reduced sums), whose dx must agree.
void batchnorm_silu_backward(Mode mode, const std::vector<double>& x, Shape4 s,
                             const ChannelParams& cp, const std::vector<double>& dy,
                             std::vector<std::vector<double>>& d) {
  const int64_t c = s.c;
  std::vector<double> mean(c), invstd(c), running_mean = cp.running_mean,
                                          running_var = cp.running_var;
  if (mode == Mode::train)
    ops::batchnorm_train_statistics<double>(dense_view(x.data(), s), kParams, running_mean.data(),
                                            running_var.data(), mean.data(), invstd.data());
  else {
    mean = cp.running_mean;
    ops::batchnorm_running_inverse_std<double>(cp.running_var.data(), c, kParams.eps, Device::cpu(),
                                               invstd.data());
  }
  const View<const double> xv = dense_view(x.data(), s), dyv = dense_view(dy.data(), s);
  const std::vector<double> poisoned(d[0].size(), std::numeric_limits<double>::quiet_NaN());
  std::vector<double> dx = poisoned;
  auto add_dx = [&] {
    for (size_t e = 0; e < dx.size(); ++e) d[0][e] += dx[e];
  };
  if (mode == Mode::eval) {
    ops::batchnorm_silu_backward_eval<double>(
        xv, dyv, cp.gamma.data(), cp.beta.data(), cp.running_mean.data(), cp.running_var.data(),
        kParams, dense_view(dx.data(), s), d[1].data(), d[2].data());
    return add_dx();
  }
  ops::batchnorm_silu_backward_train<double>(xv, dyv, cp.gamma.data(), cp.beta.data(), mean.data(),
                                             invstd.data(), dense_view(dx.data(), s), d[1].data(),
                                             d[2].data());
  // The two phases, dx their shared workspace between them (ops.h).
  std::vector<double> sum_dy(c), sum_dy_xhat(c), phased = poisoned;
  ops::batchnorm_silu_backward_reduce<double>(xv, dyv, mean.data(), invstd.data(), cp.gamma.data(),
                                              cp.beta.data(), sum_dy.data(), sum_dy_xhat.data(),
                                              dense_view(phased.data(), s));
  ops::batchnorm_silu_backward_apply<double>(xv, dyv, mean.data(), invstd.data(), cp.gamma.data(),
                                             cp.beta.data(), sum_dy.data(), sum_dy_xhat.data(),
                                             s.n * s.h * s.w, dense_view(phased.data(), s));
  check_close(phased, dx, 1e-12, 1e-14, "the two phases' dx against the one-call op's");
  add_dx();
}

}  // namespace

TEST_CASE("fused batchnorm + silu forward and backward pass the gradient check") {
  check_channel_op_gradients(
      204,
      [](Mode mode, const std::vector<double>& x, Shape4 s, const ChannelParams& cp) {
        return batchnorm_silu_forward(mode, x, s, cp, cp.gamma, cp.beta);
      },
      [](Mode mode, const std::vector<double>& x, Shape4 s, const ChannelParams& cp,
         const std::vector<double>& dy,
         std::vector<std::vector<double>>& d) { batchnorm_silu_backward(mode, x, s, cp, dy, d); });
}

namespace {

// dx, dgamma, dbeta (added onto fixed starting values) in precision T on strided views; the
// data depends only on the shape index.
template <class T>
std::vector<std::vector<double>> batchnorm_gradients(Mode mode, size_t k) {
  const Shape4 s = kShapes[k];
  const uint64_t seed = 300 + k;
  StridedBuffer<T> x = seeded_buffer<T>(s, gap_of(k), seed, 1.0);
  StridedBuffer<T> dy = seeded_buffer<T>(s, gap_of(k + 1), seed + 1);
  StridedBuffer<T> dx = seeded_buffer<T>(s, 3, seed + 2);
  Rng rng(seed + 3);
  ChannelParams cp = random_channel_params(rng, s.c);
  std::vector<T> dgamma = random_vector<T>(rng, s.c), dbeta = random_vector<T>(rng, s.c);
  batchnorm_backward<T>(mode, x.view(), dy.view(), cp, dx.view(), dgamma.data(), dbeta.data());
  return {dx.values(), convert<double>(dgamma), convert<double>(dbeta)};
}

}  // namespace

TEST_CASE("batchnorm float backward matches the double backward on strided views") {
  for (Mode mode : {Mode::train, Mode::eval})
    for (size_t k = 0; k < kShapes.size(); ++k) {
      CAPTURE(k);
      CAPTURE(mode == Mode::train);
      auto single = batchnorm_gradients<float>(mode, k);
      auto reference = batchnorm_gradients<double>(mode, k);
      check_close(single[0], reference[0], 1e-4, 1e-4, "batchnorm float dx");
      check_close(single[1], reference[1], 1e-4, 1e-4, "batchnorm float dgamma");
      check_close(single[2], reference[2], 1e-4, 1e-4, "batchnorm float dbeta");
    }
}

TEST_CASE_TEMPLATE("batchnorm phase ops composed by hand equal the train ops", T, float, double) {
  Rng rng(204);
  for (size_t k = 0; k < kShapes.size(); ++k) {
    CAPTURE(k);
    const Shape4 s = kShapes[k];
    const int64_t count = s.n * s.h * s.w;
    StridedBuffer<T> x(s, gap_of(k), rng), dy(s, gap_of(k + 1), rng);
    ChannelParams cp = random_channel_params(rng, s.c);
    std::vector<T> gamma = convert<T>(cp.gamma), beta = convert<T>(cp.beta);

    // The train ops.
    std::vector<T> running_mean(s.c), running_var(s.c, T(1)), save_mean(s.c), save_invstd(s.c);
    std::vector<T> y_train(s.numel()), dx_train(s.numel()), dgamma(s.c), dbeta(s.c);
    ops::batchnorm_forward_train<T>(x.view(), gamma.data(), beta.data(), kParams,
                                    running_mean.data(), running_var.data(), save_mean.data(),
                                    save_invstd.data(), dense_view(y_train.data(), s));
    ops::batchnorm_backward_train<T>(x.view(), dy.view(), gamma.data(), save_mean.data(),
                                     save_invstd.data(), dense_view(dx_train.data(), s),
                                     dgamma.data(), dbeta.data());

    // The same through the phases.
    std::vector<T> mean(s.c), m2(s.c), invstd(s.c), sum_dy(s.c), sum_dy_xhat(s.c);
    std::vector<T> y_phases(s.numel()), dx_phases(s.numel());
    ops::batchnorm_moments<T>(x.view(), mean.data(), m2.data());
    for (int64_t c = 0; c < s.c; ++c)
      invstd[c] = static_cast<T>(1 / std::sqrt(double(m2[c]) / count + kParams.eps));
    ops::batchnorm_apply<T>(x.view(), mean.data(), invstd.data(), gamma.data(), beta.data(),
                            dense_view(y_phases.data(), s));
    ops::batchnorm_backward_reduce<T>(x.view(), dy.view(), mean.data(), invstd.data(),
                                      sum_dy.data(), sum_dy_xhat.data());
    ops::batchnorm_backward_apply<T>(x.view(), dy.view(), mean.data(), invstd.data(), gamma.data(),
                                     sum_dy.data(), sum_dy_xhat.data(), count,
                                     dense_view(dx_phases.data(), s));

    const double tol = tolerance<T>();
    check_close(mean, save_mean, tol, tol, "batchnorm phases mean");
    check_close(invstd, save_invstd, tol, tol, "batchnorm phases invstd");
    check_close(y_phases, y_train, tol, tol, "batchnorm phases y");
    check_close(dx_phases, dx_train, tol, tol, "batchnorm phases dx");
    check_close(sum_dy_xhat, dgamma, tol, tol, "batchnorm phases dgamma");
    check_close(sum_dy, dbeta, tol, tol, "batchnorm phases dbeta");
  }
}

// The fused ops run channel by channel on buffers of their own (kernels/cpu/batchnorm_silu.cpp)
// but must give exactly the bits of the composition that defines them (kernels/ops.h). The
// shapes add a plane that is not a multiple of 8 floats and an image larger than one chunk
// of the elementwise ops.
TEST_CASE_TEMPLATE("fused batchnorm + silu ops equal their composition bit for bit", T, float,
                   double) {
  std::vector<Shape4> shapes = kShapes;
  shapes.push_back({3, 5, 13, 17});
  shapes.push_back({2, 3, 90, 70});
  Rng rng(205);
  for (size_t k = 0; k < shapes.size(); ++k) {
    CAPTURE(k);
    const Shape4 s = shapes[k];
    const int64_t count = s.n * s.h * s.w;
    StridedBuffer<T> x = seeded_buffer<T>(s, gap_of(k), 220 + k, 0.5);
    StridedBuffer<T> dy(s, gap_of(k + 1), rng);
    ChannelParams cp = random_channel_params(rng, s.c);
    std::vector<T> gamma = convert<T>(cp.gamma), beta = convert<T>(cp.beta);
    std::vector<T> mean = convert<T>(cp.running_mean), invstd(s.c);
    for (int64_t c = 0; c < s.c; ++c) invstd[c] = static_cast<T>(1 / std::sqrt(cp.running_var[c]));
    std::vector<T> running_mean = convert<T>(cp.running_mean);
    std::vector<T> running_var = convert<T>(cp.running_var);

    // Forward: y of the fused op (on a poisoned, strided output) and of the composition.
    StridedBuffer<T> y(s, gap_of(k), rng);
    y.poison();
    ops::batchnorm_silu_apply<T>(x.view(), mean.data(), invstd.data(), gamma.data(), beta.data(),
                                 y.view());
    std::vector<T> bn(s.numel()), y_ref(s.numel());
    ops::batchnorm_apply<T>(x.view(), mean.data(), invstd.data(), gamma.data(), beta.data(),
                            dense_view(bn.data(), s));
    ops::silu_forward<T>(dense_view<const T>(bn.data(), s), dense_view(y_ref.data(), s));
    check_close(y.values(), y_ref, 0, 0, "fused apply y");

    // dbn = silu_backward(bn, dy) for bn normalised with (mean, invstd): what the composition
    // hands to the BatchNorm ops; the fused ops normalise x again themselves.
    auto silu_gradient = [&](const std::vector<T>& normalized) {
      std::vector<T> out(s.numel(), T(0));
      ops::silu_backward<T>(dense_view<const T>(normalized.data(), s), dy.view(),
                            dense_view(out.data(), s));
      return out;
    };
    const std::vector<T> dbn = silu_gradient(bn);
    const View<const T> dbnv = dense_view<const T>(dbn.data(), s);
    // The fused ops write dx (poisoned first: every value must be written) where the
    // composition adds into a zeroed one; dgamma and dbeta accumulate in both.
    StridedBuffer<T> dx(s, gap_of(k + 1), rng);
    const std::vector<T> dx_zero(s.numel(), T(0));
    std::vector<T> dgamma_start = random_vector<T>(rng, s.c),
                   dbeta_start = random_vector<T>(rng, s.c);

    // backward_train, and SyncBatchNorm's two phases.
    dx.poison();
    std::vector<T> dgamma = dgamma_start, dbeta = dbeta_start;
    ops::batchnorm_silu_backward_train<T>(x.view(), dy.view(), gamma.data(), beta.data(),
                                          mean.data(), invstd.data(), dx.view(), dgamma.data(),
                                          dbeta.data());
    std::vector<T> dx_ref = dx_zero;
    std::vector<T> dgamma_ref = dgamma_start, dbeta_ref = dbeta_start;
    ops::batchnorm_backward_train<T>(x.view(), dbnv, gamma.data(), mean.data(), invstd.data(),
                                     dense_view(dx_ref.data(), s), dgamma_ref.data(),
                                     dbeta_ref.data());
    check_close(dx.values(), dx_ref, 0, 0, "fused backward_train dx");
    check_close(dgamma, dgamma_ref, 0, 0, "fused backward_train dgamma");
    check_close(dbeta, dbeta_ref, 0, 0, "fused backward_train dbeta");

    // SyncBatchNorm's phases pass dx between them (their workspace, ops.h): poisoned before
    // reduce, not between.
    std::vector<T> sum_dy(s.c), sum_dy_xhat(s.c), sum_dy_ref(s.c), sum_dy_xhat_ref(s.c);
    dx.poison();
    ops::batchnorm_silu_backward_reduce<T>(x.view(), dy.view(), mean.data(), invstd.data(),
                                           gamma.data(), beta.data(), sum_dy.data(),
                                           sum_dy_xhat.data(), dx.view());
    ops::batchnorm_backward_reduce<T>(x.view(), dbnv, mean.data(), invstd.data(), sum_dy_ref.data(),
                                      sum_dy_xhat_ref.data());
    check_close(sum_dy, sum_dy_ref, 0, 0, "fused backward_reduce sum_dy");
    check_close(sum_dy_xhat, sum_dy_xhat_ref, 0, 0, "fused backward_reduce sum_dy_xhat");
    dx_ref = dx_zero;
    ops::batchnorm_silu_backward_apply<T>(x.view(), dy.view(), mean.data(), invstd.data(),
                                          gamma.data(), beta.data(), sum_dy.data(),
                                          sum_dy_xhat.data(), count, dx.view());
    ops::batchnorm_backward_apply<T>(x.view(), dbnv, mean.data(), invstd.data(), gamma.data(),
                                     sum_dy.data(), sum_dy_xhat.data(), count,
                                     dense_view(dx_ref.data(), s));
    check_close(dx.values(), dx_ref, 0, 0, "fused backward_apply dx");

    // backward_eval: bn is normalised with the running statistics.
    std::vector<T> running_invstd(s.c), bn_eval(s.numel());
    ops::batchnorm_running_inverse_std<T>(running_var.data(), s.c, kParams.eps, Device::cpu(),
                                          running_invstd.data());
    ops::batchnorm_apply<T>(x.view(), running_mean.data(), running_invstd.data(), gamma.data(),
                            beta.data(), dense_view(bn_eval.data(), s));
    const std::vector<T> dbn_eval = silu_gradient(bn_eval);
    dx.poison();
    dx_ref = dx_zero;
    dgamma = dgamma_ref = dgamma_start;
    dbeta = dbeta_ref = dbeta_start;
    ops::batchnorm_silu_backward_eval<T>(x.view(), dy.view(), gamma.data(), beta.data(),
                                         running_mean.data(), running_var.data(), kParams,
                                         dx.view(), dgamma.data(), dbeta.data());
    ops::batchnorm_backward_eval<T>(x.view(), dense_view<const T>(dbn_eval.data(), s), gamma.data(),
                                    running_mean.data(), running_var.data(), kParams,
                                    dense_view(dx_ref.data(), s), dgamma_ref.data(),
                                    dbeta_ref.data());
    check_close(dx.values(), dx_ref, 0, 0, "fused backward_eval dx");
    check_close(dgamma, dgamma_ref, 0, 0, "fused backward_eval dgamma");
    check_close(dbeta, dbeta_ref, 0, 0, "fused backward_eval dbeta");
  }
}

TEST_CASE("batchnorm rejects mismatched shapes and too few values per channel") {
  std::vector<float> x(2 * 3 * 4 * 4), y(x.size()), stats(3 * 6, 1.0f);
  float *gamma = stats.data(), *beta = gamma + 3, *rm = beta + 3, *rv = rm + 3, *sm = rv + 3,
        *si = sm + 3;
  auto train = [&](Shape4 x_shape, Shape4 y_shape) {
    ops::batchnorm_forward_train<float>(dense_view<const float>(x.data(), x_shape), gamma, beta, {},
                                        rm, rv, sm, si, dense_view(y.data(), y_shape));
  };
  CHECK_NOTHROW(train({2, 3, 4, 4}, {2, 3, 4, 4}));
  CHECK_THROWS_AS(train({2, 3, 4, 4}, {2, 3, 4, 3}), std::invalid_argument);
  CHECK_THROWS_AS(train({1, 3, 1, 1}, {1, 3, 1, 1}), std::invalid_argument);
}
