// tests/unit/op_profile.cpp — the per-op profile (kernels/op_profile.h): each routed CPU op is
// counted under its name while profiling is on, an op that runs other ops counts once, and
// nothing is recorded while it is off.
#include <doctest/doctest.h>

#include <random>
#include <vector>

#include "engine/tensor.h"
#include "kernels/op_profile.h"
#include "kernels/ops.h"

using namespace bareyolo;

namespace {

Tensor random_tensor(Shape4 shape, uint32_t seed) {
  std::mt19937 random(seed);
  std::uniform_real_distribution<float> value(-2.0f, 2.0f);
  std::vector<float> values(size_t(shape.numel()));
  for (float& v : values) v = value(random);
  return Tensor::from_vector(values, shape);
}

}  // namespace

TEST_CASE("op profile: routed CPU ops are counted once each, the outer op only, when on") {
  const Tensor x = random_tensor({2, 3, 8, 8}, 1);
  Tensor y = Tensor::zeros(x.shape());
  std::vector<float> gamma(3, 1.0f), beta(3, 0.0f), running_mean(3, 0.0f), running_var(3, 1.0f),
      save_mean(3), save_invstd(3);
  auto run_ops = [&] {
    ops::silu_forward<float>(x.view<float>(), y.view<float>());
    ops::silu_forward<float>(x.view<float>(), y.view<float>());
    // Runs batchnorm_train_statistics and batchnorm_apply inside: counted as itself only.
    ops::batchnorm_forward_train<float>(x.view<float>(), gamma.data(), beta.data(), {},
                                        running_mean.data(), running_var.data(), save_mean.data(),
                                        save_invstd.data(), y.view<float>());
  };

  op_profile::take();
  op_profile::enable(false);
  run_ops();
  CHECK(op_profile::take().empty());

  op_profile::enable(true);
  run_ops();
  op_profile::enable(false);
  const std::map<std::string, op_profile::Totals> totals = op_profile::take();
  REQUIRE(totals.size() == 2);
  REQUIRE(totals.count("silu_forward") == 1);
  REQUIRE(totals.count("batchnorm_forward_train") == 1);
  CHECK(totals.at("silu_forward").calls == 2);
  CHECK(totals.at("batchnorm_forward_train").calls == 1);
  CHECK(totals.at("silu_forward").seconds > 0);
  CHECK(totals.at("batchnorm_forward_train").seconds > 0);
  CHECK(op_profile::take().empty());  // take() cleared them
}
