// kernels/cpu/batchnorm_channel.h — one channel of the CPU BatchNorm ops: the loop over
// channels, the per-channel sums and the per-plane formulas that kernels/cpu/batchnorm.cpp's
// ops and the fused BatchNorm + SiLU ops (kernels/cpu/batchnorm_silu.cpp) share, so that the
// fused ops give the same bits as the composition that defines them.
//
// Per channel c, over the count = n*h*w elements of the batch:
//   xhat = (x - mean) * invstd,  y = xhat * gamma + beta
//   dx  += gamma * invstd * (dy - sum(dy) / count - xhat * sum(dy * xhat) / count)
// Every per-channel sum runs in double even for float data: a channel of a 640x640 batch of 16
// sums millions of values, beyond what a float accumulator keeps.
//
// A double sum written as one accumulator is a chain of dependent adds the compiler may not
// reorder (no -ffast-math): one element per add latency. LaneSum keeps kLanes partial sums
// instead (element j of a plane goes to lane j % kLanes), which vectorize, and adds the lanes
// in a fixed order at the end.
//
// Threads: one task per channel. A channel's sums run serially in image order, so the result
// does not depend on the thread count.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "kernels/batchnorm_statistics.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/view.h"

namespace bareyolo::cpu::batchnorm {

// n*h*w of x, after checking it is at least `at_least`.
inline int64_t values_per_channel(const char* op, Shape4 x, int64_t at_least) {
  const int64_t count = x.n * x.h * x.w;
  if (count < at_least)
    throw std::invalid_argument(std::string(op) + ": x of shape " + x.str() + " has " +
                                std::to_string(count) + " values per channel; at least " +
                                std::to_string(at_least) + " are needed");
  return count;
}

// Runs per_channel(c) for c in [0, channels), one channel per task on the thread pool.
template <class PerChannel>
void for_each_channel(int64_t channels, PerChannel per_channel) {
  parallel_for(channels, 1, [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; ++c) per_channel(c);
  });
}

// Partial sums in double, see the header.
constexpr int kLanes = 16;
struct LaneSum {
  double lanes[kLanes] = {};

  // Adds term(j) for j in [0, count), element j into lane j % kLanes.
  template <class Term>
  void add(int64_t count, Term term) {
    double acc[kLanes];  // a local copy the compiler can keep in registers
    std::copy(lanes, lanes + kLanes, acc);
    int64_t j = 0;
    for (; j + kLanes <= count; j += kLanes)
      for (int l = 0; l < kLanes; ++l) acc[l] += term(j + l);
    for (int l = 0; j < count; ++j, ++l) acc[l] += term(j);
    std::copy(acc, acc + kLanes, lanes);
  }
  double total() const {
    double sum = 0;
    for (double lane : lanes) sum += lane;
    return sum;
  }
};

// Phase 1 of the forward (kernels/ops.h): the count, mean and M2 = sum((x - mean)^2) of some
// values. A channel's are its planes', each taken in two passes (mean, then the squared
// deviations from it) and merged in image order, so that a convolution can take an image's
// planes while it writes them (conv2d_forward with moments) and give the same bits.
struct Moments {
  double count = 0, mean = 0, m2 = 0;
};

template <class T>
Moments plane_moments(const T* xs, int64_t plane) {
  LaneSum sum;
  sum.add(plane, [xs](int64_t j) { return static_cast<double>(xs[j]); });
  const double mean = sum.total() / static_cast<double>(plane);
  LaneSum squared_deviations;
  squared_deviations.add(plane, [xs, mean](int64_t j) {
    const double deviation = xs[j] - mean;
    return deviation * deviation;
  });
  return {static_cast<double>(plane), mean, squared_deviations.total()};
}

// The moments of a's values and b's together (kernels/batchnorm_statistics.h).
inline Moments merge(const Moments& a, const Moments& b) {
  const ops::batchnorm::MeanM2<double> merged =
      ops::batchnorm::merged_moments(a.count, a.mean, a.m2, b.count, b.mean, b.m2);
  return {a.count + b.count, merged.mean, merged.m2};
}

// A channel's moments: its `batch` planes' (plane_of(i) for image i) merged in image order.
template <class PlaneOf>
Moments channel_moments(int64_t batch, PlaneOf plane_of) {
  Moments total;
  for (int64_t i = 0; i < batch; ++i) total = merge(total, plane_of(i));
  return total;
}

// y = (x - mean) * invstd * gamma + beta over one plane of a channel.
template <class T>
struct Normalize {
  T mean, scale, shift;
  Normalize(T mean_, T invstd, T gamma, T beta) : mean(mean_), scale(invstd * gamma), shift(beta) {}
  // One fma where the CPU has it, as the AVX2 paths (kernels/cpu/batchnorm_silu.cpp) compute
  // it: written out, because whether a compiler contracts a * b + c depends on its flags (GCC
  // does at -O2, not at -O1), and the fused ops must give these bits.
  T operator()(T x) const {
#ifdef __FMA__
    return std::fma(x - mean, scale, shift);
#else
    return (x - mean) * scale + shift;
#endif
  }
  void operator()(const T* xs, T* ys, int64_t plane) const {
    for (int64_t j = 0; j < plane; ++j) ys[j] = (*this)(xs[j]);
  }
};

// One channel's backward sums over the batch: sum(dy) and sum(dy * xhat).
template <class T>
struct BackwardSums {
  T dy, dy_xhat;
};

// x_plane(i) and dy_plane(i) give image i's plane of the channel; they are called once each,
// in image order.
template <class T, class XPlane, class DyPlane>
BackwardSums<T> backward_sums(int64_t batch, int64_t plane, T mean, T invstd, XPlane x_plane,
                              DyPlane dy_plane) {
  const double mu = mean;
  LaneSum dy_sum, dy_centered_sum;  // sum(dy), sum(dy * (x - mean))
  for (int64_t i = 0; i < batch; ++i) {
    const T* xs = x_plane(i);
    const T* dys = dy_plane(i);
    dy_sum.add(plane, [dys](int64_t j) { return static_cast<double>(dys[j]); });
    dy_centered_sum.add(plane, [xs, dys, mu](int64_t j) { return dys[j] * (xs[j] - mu); });
  }
  return {static_cast<T>(dy_sum.total()), static_cast<T>(dy_centered_sum.total() * invstd)};
}

// dx += gamma * invstd * (dy - mean(dy) - xhat * mean(dy * xhat)) over one plane of a
// channel, given the channel's backward sums over `count` values (the backward ops add into
// dx, kernels/ops.h); or dx written over dy, as the fused BatchNorm + SiLU ops do (writing v
// gives what adding v to a zeroed buffer gives, up to the sign of a zero).
template <class T>
struct BackwardApply {
  T scale, mean, invstd, mean_dy, mean_dy_xhat;
  BackwardApply(T gamma, T invstd_, T mean_, BackwardSums<T> sums, int64_t count)
      : scale(gamma * invstd_),
        mean(mean_),
        invstd(invstd_),
        mean_dy(sums.dy / static_cast<T>(count)),
        mean_dy_xhat(sums.dy_xhat / static_cast<T>(count)) {}
  void add(const T* xs, const T* dys, T* dxs, int64_t plane) const {
    for (int64_t j = 0; j < plane; ++j) dxs[j] += dx(xs[j], dys[j]);
  }
  // dys_dxs holds dy on entry and dx on return.
  void write_over_dy(const T* xs, T* dys_dxs, int64_t plane) const {
    for (int64_t j = 0; j < plane; ++j) dys_dxs[j] = dx(xs[j], dys_dxs[j]);
  }

 private:
  T dx(T x, T dy) const { return scale * (dy - mean_dy - (x - mean) * invstd * mean_dy_xhat); }
};

// dx += gamma * invstd * dy over one plane, or dx written over dy: evaluation's backward,
// whose statistics are constants.
template <class T>
struct EvalBackwardApply {
  T scale;
  EvalBackwardApply(T gamma, T invstd) : scale(gamma * invstd) {}
  void add(const T* dys, T* dxs, int64_t plane) const {
    for (int64_t j = 0; j < plane; ++j) dxs[j] += scale * dys[j];
  }
  void write_over_dy(T* dys_dxs, int64_t plane) const {
    for (int64_t j = 0; j < plane; ++j) dys_dxs[j] = scale * dys_dxs[j];
  }
};

}  // namespace bareyolo::cpu::batchnorm
