// data/rng.h — the random numbers of the data pipeline.
//
// Every random draw for one training sample comes from its own stream, keyed by
// (seed, epoch, sample index): the batch a step sees is the same for any number of loader
// workers and any world size, and no two samples draw the same augmentation. Keys are mixed
// with splitmix64 (one round per component, so (1, 2, 3) and (2, 1, 3) differ), and the
// stream itself is xoshiro256** (Blackman & Vigna) seeded by splitmix64 from that key:
// small, fast, and with 2^256 states no two of our streams overlap in practice.
#pragma once

#include <cmath>
#include <cstdint>
#include <numbers>

namespace bareyolo::data {

// splitmix64's finaliser: a bijection on 64 bits that scrambles every input bit.
constexpr uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

constexpr uint64_t mix_key(uint64_t seed, uint64_t epoch, uint64_t index) {
  return splitmix64(splitmix64(splitmix64(seed) ^ epoch) ^ index);
}

class SampleRng {
 public:
  SampleRng(uint64_t seed, uint64_t epoch, uint64_t index) {
    uint64_t key = mix_key(seed, epoch, index);
    for (uint64_t& word : state_) word = key = splitmix64(key);
  }

  uint64_t next() {
    uint64_t result = rotl(state_[1] * 5, 7) * 9;
    uint64_t t = state_[1] << 17;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = rotl(state_[3], 45);
    return result;
  }
  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  // Uniform in [lo, hi) (Python's random.uniform).
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  // Uniform integer in [0, n), unbiased (Lemire's multiply-and-reject).
  uint64_t below(uint64_t n) {
    unsigned __int128 m = static_cast<unsigned __int128>(next()) * n;
    uint64_t low = static_cast<uint64_t>(m);
    if (low < n) {
      uint64_t threshold = (0 - n) % n;
      while (low < threshold) {
        m = static_cast<unsigned __int128>(next()) * n;
        low = static_cast<uint64_t>(m);
      }
    }
    return static_cast<uint64_t>(m >> 64);
  }
  bool chance(double p) { return uniform() < p; }
  // Beta(a, b) for a, b >= 1 (mixup's ratio), as X / (X + Y) of X ~ Gamma(a), Y ~ Gamma(b).
  double beta(double a, double b) {
    const double x = gamma(a);
    return x / (x + gamma(b));
  }

 private:
  // Standard normal by Box-Muller (one of the pair; 1 - u keeps the log's argument > 0).
  double normal() {
    const double radius = std::sqrt(-2 * std::log(1 - uniform()));
    return radius * std::cos(2 * std::numbers::pi * uniform());
  }
  // Gamma(shape, 1) for shape >= 1 by Marsaglia and Tsang's squeeze-free rejection (2000): v =
  // (1 + c z)^3 of a normal z is accepted with the density ratio, d v is the draw.
  double gamma(double shape) {
    const double d = shape - 1.0 / 3, c = 1 / std::sqrt(9 * d);
    while (true) {
      const double z = normal(), v = std::pow(1 + c * z, 3);
      if (v <= 0) continue;
      if (std::log(1 - uniform()) < z * z / 2 + d - d * v + d * std::log(v)) return d * v;
    }
  }

  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t state_[4];
};

}  // namespace bareyolo::data
