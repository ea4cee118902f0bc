// tests/support/testing.h — what every op test shares: seeded random data that is never all zeros,
// strided views over it, a tolerance check, the one finite-difference gradient checker that
// every backward in kernels/cpu is held to (Caffe's GradientChecker idea), and a scoped thread
// count for the tests that compare bits across thread counts.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cpu/thread_pool.h"
#include "kernels/view.h"

namespace bareyolo::testing {

using Rng = std::mt19937_64;

// The global pool at `threads` threads for this object's scope; the previous count comes back
// when it ends, also when a REQUIRE throws out of it, so no later test runs at the wrong one.
class PoolThreads {
 public:
  explicit PoolThreads(int threads) : saved_(ThreadPool::global().num_threads()) {
    ThreadPool::global().resize(threads);
  }
  ~PoolThreads() { ThreadPool::global().resize(saved_); }
  PoolThreads(const PoolThreads&) = delete;
  PoolThreads& operator=(const PoolThreads&) = delete;

 private:
  int saved_;
};

// Uniform values in [lo, hi). Fixed seeds keep a failure reproducible.
template <class T = double>
std::vector<T> random_vector(Rng& rng, int64_t count, double lo = -1.0, double hi = 1.0) {
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<T> values(static_cast<size_t>(count));
  for (auto& v : values) v = static_cast<T>(dist(rng));
  return values;
}

inline int random_int(Rng& rng, int lo, int hi) {  // inclusive
  return std::uniform_int_distribution<int>(lo, hi)(rng);
}

template <class To, class From>
std::vector<To> convert(const std::vector<From>& values) {
  return std::vector<To>(values.begin(), values.end());
}

// A buffer for an NCHW view whose images sit `gap` elements apart beyond their size, so a
// kernel that assumes dense batches reads the gap (filled with NaN) and fails loudly.
template <class T>
struct StridedBuffer {
  std::vector<T> storage;
  Shape4 shape;
  int64_t batch_stride;

  StridedBuffer(Shape4 s, int64_t gap, Rng& rng)
      : storage(static_cast<size_t>(s.n * (s.image_numel() + gap)),
                std::numeric_limits<T>::quiet_NaN()),
        shape(s),
        batch_stride(s.image_numel() + gap) {
    std::uniform_real_distribution<double> dist(-1.0, 1.0);
    for (int64_t i = 0; i < s.n; ++i)
      for (int64_t j = 0; j < s.image_numel(); ++j)
        storage[i * batch_stride + j] = static_cast<T>(dist(rng));
  }
  // Values that depend only on the seed, so float and double buffers made from one seed
  // hold the same numbers (up to rounding).
  static StridedBuffer seeded(Shape4 s, int64_t gap, uint64_t seed) {
    Rng rng(seed);
    return StridedBuffer(s, gap, rng);
  }

  View<T> view() { return {storage.data(), shape, batch_stride, Device::cpu()}; }
  // Every element NaN: an output a kernel fails to write then fails the comparison.
  void poison() { std::fill(storage.begin(), storage.end(), std::numeric_limits<T>::quiet_NaN()); }
  // The elements image after image, without the gaps.
  std::vector<double> values() const {
    std::vector<double> dense;
    for (int64_t n = 0; n < shape.n; ++n)
      dense.insert(dense.end(), storage.begin() + n * batch_stride,
                   storage.begin() + n * batch_stride + shape.image_numel());
    return dense;
  }
  T& at(int64_t n, int64_t c, int64_t h, int64_t w) {
    return storage[n * batch_stride + (c * shape.h + h) * shape.w + w];
  }
};

// |actual - expected| <= atol + rtol * |expected|, element by element; reports the first miss.
template <class A, class B>
void check_close(const std::vector<A>& actual, const std::vector<B>& expected, double rtol,
                 double atol, const std::string& what) {
  REQUIRE_MESSAGE(actual.size() == expected.size(), what << ": sizes differ");
  for (size_t i = 0; i < actual.size(); ++i) {
    double a = static_cast<double>(actual[i]), e = static_cast<double>(expected[i]);
    bool ok = std::isfinite(a) && std::fabs(a - e) <= atol + rtol * std::fabs(e);
    if (!ok) {
      FAIL_CHECK(what << ": element " << i << " is " << a << ", expected " << e << " (rtol " << rtol
                      << ", atol " << atol << ")");
      return;
    }
  }
}

// The gradient checker. The op under test is seen as a function of some input buffers:
//   forward()   reads the inputs and returns all outputs, flattened into one vector;
//   backward(dout, dinputs)  gets dL/d(outputs) in the same flattened order and must ADD
//               dL/d(input i) into dinputs[i] (the accumulate convention of kernels/ops.h).
// With L = <g, forward()> for a random g, each analytic derivative is compared with the
// central difference (L(x + h) - L(x - h)) / 2h in double precision. The gradient buffers
// start with random values, which are subtracted afterwards: that checks that backward
// accumulates instead of overwriting.
struct GradCheck {
  std::vector<std::vector<double>*> inputs;
  std::vector<std::string> names;  // for messages, one per input
  std::function<std::vector<double>()> forward;
  std::function<void(const std::vector<double>& dout, std::vector<std::vector<double>>& dinputs)>
      backward;
  double step = 1e-6;
  double tolerance = 1e-6;         // on |analytic - numeric| / max(1, |analytic|, |numeric|)
  int max_checks_per_input = 300;  // a random subset of elements beyond this many

  void run(Rng& rng) const {
    std::vector<double> outputs = forward();
    REQUIRE_MESSAGE(!outputs.empty(), "gradient check: the op produced no output");
    std::vector<double> g = random_vector(rng, static_cast<int64_t>(outputs.size()));

    std::vector<std::vector<double>> dinputs, initial;
    for (auto* input : inputs)
      initial.push_back(random_vector(rng, static_cast<int64_t>(input->size())));
    dinputs = initial;
    backward(g, dinputs);

    auto loss = [&] {
      std::vector<double> out = forward();
      double sum = 0;
      for (size_t i = 0; i < out.size(); ++i) sum += g[i] * out[i];
      return sum;
    };
    for (size_t which = 0; which < inputs.size(); ++which) {
      std::vector<double>& x = *inputs[which];
      std::vector<size_t> elements(x.size());
      for (size_t i = 0; i < x.size(); ++i) elements[i] = i;
      if (static_cast<int>(elements.size()) > max_checks_per_input) {
        std::shuffle(elements.begin(), elements.end(), rng);
        elements.resize(static_cast<size_t>(max_checks_per_input));
      }
      for (size_t i : elements) {
        double saved = x[i];
        x[i] = saved + step;
        double loss_plus = loss();
        x[i] = saved - step;
        double loss_minus = loss();
        x[i] = saved;
        double numeric = (loss_plus - loss_minus) / (2 * step);
        double analytic = dinputs[which][i] - initial[which][i];
        double scale = std::max({1.0, std::fabs(numeric), std::fabs(analytic)});
        if (std::fabs(analytic - numeric) > tolerance * scale) {
          FAIL_CHECK("d/d " << names.at(which) << "[" << i << "]: backward gives " << analytic
                            << ", finite difference " << numeric);
          return;
        }
      }
    }
  }
};

}  // namespace bareyolo::testing
