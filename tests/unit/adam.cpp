// tests/unit/adam.cpp — Adam and AdamW as PyTorch defines them (L2 or decoupled weight decay,
// bias-corrected moments), against the textbook form of each update computed here in double,
// and YOLOv5's parameter groups.
#include <cmath>

#include "engine/optim/adam.h"
#include "engine/optim/schedule.h"
#include "engine/parameter_arena.h"
#include "engine/shipped_files.h"
#include "kernels/ops.h"
#include "kernels/optim_update.h"
#include "models/yolo/yolo_model.h"
#include "tests/support/testing.h"

using namespace bareyolo;
using namespace bareyolo::testing;

TEST_CASE("adamw groups yolov5n's parameters as YOLOv5 does, decay on conv weights only") {
  models::DetectionModel model(models::load_model_config(shipped_file("models/yolov5n.yaml")));
  ParameterArena arena(model.state());
  Adam adamw(arena, AdamDecay::decoupled, 0.001, 0.937, 5e-4);
  int counts[3] = {0, 0, 0};
  for (const ParameterArena::Slot& slot : arena.slots())
    if (slot.grad) counts[optimizer_group_index(slot.group)]++;
  const int biases = optimizer_group_index(ParamGroup::bias);
  const int weights = optimizer_group_index(ParamGroup::weight);
  const int norms = optimizer_group_index(ParamGroup::norm_weight);
  CHECK(counts[biases] == 60);
  CHECK(counts[weights] == 60);
  CHECK(counts[norms] == 57);
  CHECK(adamw.group(weights).weight_decay == 5e-4);
  CHECK(adamw.group(biases).weight_decay == 0);
  CHECK(adamw.group(norms).weight_decay == 0);
  CHECK(adamw.state().size() == 2 * 177);  // exp_avg and exp_avg_sq of every parameter
}

namespace {

// Four steps of `decay`'s rule over one weight tensor of 37 random values against the textbook
// update in double: Kingma & Ba's Adam with L2 decay in the gradient (PyTorch's Adam), or
// Loshchilov & Hutter's decoupled decay (AdamW).
void check_against_textbook(AdamDecay decay_kind) {
  Rng rng(11);
  const int n = 37;
  const double lr = 0.01, beta1 = 0.937, beta2 = 0.999, eps = 1e-8, decay = 0.05;
  std::vector<double> w = random_vector(rng, n), m(n, 0.0), v(n, 0.0);
  Tensor weight = Tensor::from_vector(w, {1, 1, 1, n});
  Tensor grad = Tensor::zeros({1, 1, 1, n}, Device::cpu(), DType::f64);
  std::vector<StateEntry> state = {{"w", &weight, &grad, {n}, ParamGroup::weight}};
  ParameterArena arena(state);
  Adam adam(arena, decay_kind, lr, beta1, decay, beta2, eps);
  for (int t = 1; t <= 4; ++t) {
    std::vector<double> g = random_vector(rng, n);
    grad.copy_from(Tensor::from_vector(g, {1, 1, 1, n}));
    adam.step();
    for (int i = 0; i < n; ++i) {
      if (decay_kind == AdamDecay::decoupled)
        w[i] -= lr * decay * w[i];
      else
        g[i] += decay * w[i];
      m[i] = beta1 * m[i] + (1 - beta1) * g[i];
      v[i] = beta2 * v[i] + (1 - beta2) * g[i] * g[i];
      const double m_hat = m[i] / (1 - std::pow(beta1, t)), v_hat = v[i] / (1 - std::pow(beta2, t));
      w[i] -= lr * m_hat / (std::sqrt(v_hat) + eps);
    }
    CHECK(adam.steps() == t);
    const std::vector<double> got = weight.to_vector<double>();
    for (int i = 0; i < n; ++i) CHECK(got[size_t(i)] == doctest::Approx(w[i]).epsilon(1e-12));
  }
  const auto named = adam.state();  // exp_avg.w, exp_avg_sq.w
  REQUIRE(named.size() == 2);
  CHECK(named[0].first == "exp_avg.w");
  CHECK(named[1].first == "exp_avg_sq.w");
  CHECK(named[0].second->to_vector<double>()[3] == doctest::Approx(m[3]).epsilon(1e-12));
  CHECK(named[1].second->to_vector<double>()[3] == doctest::Approx(v[3]).epsilon(1e-12));
  adam.zero_grad();
  CHECK(grad.to_vector<double>() == std::vector<double>(n, 0.0));
}

}  // namespace

TEST_CASE("adamw steps match the textbook bias-corrected update over several steps") {
  check_against_textbook(AdamDecay::decoupled);
}

TEST_CASE("adam steps match the textbook update with L2 decay in the gradient") {
  check_against_textbook(AdamDecay::l2);
}

TEST_CASE("adamw's first step moves every parameter by about lr against its gradient's sign") {
  // After one step m_hat = g and v_hat = g^2, so the update is lr * g / (|g| + eps).
  Tensor w = Tensor::from_vector(std::vector<float>{1.0f, -2.0f, 0.5f}, {1, 1, 1, 3});
  Tensor g = Tensor::from_vector(std::vector<float>{3.0f, -0.01f, 100.0f}, {1, 1, 1, 3});
  std::vector<StateEntry> state = {{"b", &w, &g, {3}, ParamGroup::bias}};
  ParameterArena arena(state);
  Adam adamw(arena, AdamDecay::decoupled, 0.1, 0.9,
             0.5);  // biases: no decay whatever the decay argument
  adamw.step();
  const std::vector<float> after = w.to_vector<float>();
  // Relative 1e-6: with 1 - beta2 rounded from the float beta2 (0.001 - 1.3e-5) the third
  // came out 0.39999935.
  CHECK(after[0] == doctest::Approx(0.9).scale(0).epsilon(1e-6));
  CHECK(after[1] == doctest::Approx(-1.9).scale(0).epsilon(1e-6));
  CHECK(after[2] == doctest::Approx(0.4).scale(0).epsilon(1e-6));
}

TEST_CASE("adam's beta1 stays fixed through warm-up's momentum ramp (YOLOv5 ramps SGD's)") {
  // Two AdamWs over the same values and gradients; warm-up sets one's groups to momentum 0.8,
  // the other's to 0.937, its beta1: their steps are the same, bit for bit.
  Rng rng(13);
  const int n = 16;
  const std::vector<float> start = random_vector<float>(rng, n);
  Tensor a = Tensor::from_vector(start, {1, 1, 1, n}), b = Tensor::from_vector(start, {1, 1, 1, n});
  Tensor ga = Tensor::zeros({1, 1, 1, n}), gb = Tensor::zeros({1, 1, 1, n});
  std::vector<StateEntry> state_a = {{"w", &a, &ga, {n}, ParamGroup::weight}};
  std::vector<StateEntry> state_b = {{"w", &b, &gb, {n}, ParamGroup::weight}};
  ParameterArena arena_a(state_a), arena_b(state_b);
  Adam ramped(arena_a, AdamDecay::decoupled, 0.01, 0.937, 5e-4);
  Adam fixed(arena_b, AdamDecay::decoupled, 0.01, 0.937, 5e-4);
  for (int t = 0; t < 3; ++t) {
    const Tensor g = Tensor::from_vector(random_vector<float>(rng, n), {1, 1, 1, n});
    ga.copy_from(g), gb.copy_from(g);
    apply({.bias_lr = 0.1, .lr = 0.01, .momentum = 0.8, .accumulate = 1}, ramped);
    apply({.bias_lr = 0.1, .lr = 0.01, .momentum = 0.937, .accumulate = 1}, fixed);
    ramped.step(), fixed.step();
  }
  CHECK(a.to_vector<float>() == b.to_vector<float>());
  CHECK(a.to_vector<float>() != start);
}

TEST_CASE("adam_step refuses buffers of different shapes") {
  Tensor w = Tensor::zeros({1, 1, 1, 3}), g = Tensor::zeros({1, 1, 1, 3});
  Tensor m = Tensor::zeros({1, 1, 1, 2}), v = Tensor::zeros({1, 1, 1, 3});
  const Tensor groups = Tensor::zeros({1, 1, 1, 3}, Device::cpu(), DType::u8);
  const ops::AdamFactors<float> settings[] = {ops::AdamFactors<float>::of({})};
  CHECK_THROWS_AS(ops::adam_step<float>(w.view<float>(), g.view<float>(), m.view<float>(),
                                        v.view<float>(), groups.view<uint8_t>(), settings, 1),
                  std::invalid_argument);
}
