// tests/unit/layers.cpp — the engine's modules (Conv2d, BatchNorm2d, ConvBnSilu, Upsample): state
// names and shapes, backward against finite differences through the whole module and writing
// its input's gradient where told to, and SyncBatchNorm's statistics against the single-process
// op's.
#include <array>
#include <memory>
#include <type_traits>
#include <vector>

#include "engine/distributed/comm/communicator.h"
#include "engine/layers/conv_bn_silu.h"
#include "engine/layers/upsample.h"
#include "tests/support/winograd_use.h"
#include "tests/unit/module_check.h"

using namespace bareyolo;
using namespace bareyolo::testing;

TEST_CASE("ConvBnSilu state is named and shaped as YOLOv5's Conv") {
  std::mt19937_64 init(1);
  ConvBnSilu block(3, 16, 6, 2, 2, kYolov5Bn, init);
  std::vector<StateEntry> state;
  block.collect_state("model.0.", state);
  std::vector<std::string> names;
  for (auto& e : state) names.push_back(e.name);
  CHECK(names == std::vector<std::string>{"model.0.conv.weight", "model.0.bn.weight",
                                          "model.0.bn.bias", "model.0.bn.running_mean",
                                          "model.0.bn.running_var",
                                          "model.0.bn.num_batches_tracked"});
  CHECK(state[0].dims == std::vector<int64_t>{16, 3, 6, 6});
  CHECK(state[5].dims.empty());
  CHECK(state[5].value->dtype() == DType::i64);
  CHECK(state[0].group == ParamGroup::weight);
  CHECK(state[1].group == ParamGroup::norm_weight);
  CHECK(state[2].group == ParamGroup::bias);
  const Shape4 in = {2, 3, 64, 48};
  CHECK(block.output_shape(std::array{in}) == Shape4{2, 16, 32, 24});
}

TEST_CASE("ConvBnSilu backward matches finite differences in train and eval mode") {
  Rng rng(61);
  for (Mode mode : {Mode::train, Mode::eval}) {
    std::mt19937_64 init(2);
    ConvBnSilu block(3, 4, 3, 2, -1, kYolov5Bn, init, Device::cpu(), DType::f64);
    check_module_gradients(block, {{2, 3, 7, 6}}, mode, rng);
  }
}

TEST_CASE("Conv2d with bias backward matches finite differences") {
  Rng rng(62);
  std::mt19937_64 init(3);
  Conv2d conv({.c_in = 5, .c_out = 7, .kernel = 1, .bias = true}, init, Device::cpu(), DType::f64);
  check_module_gradients(conv, {{2, 5, 3, 4}}, Mode::train, rng);
}

TEST_CASE(
    "Conv2d, BatchNorm2d, ConvBnSilu, Upsample backward told to overwrite write what they add") {
  Rng rng(63);
  std::mt19937_64 init(4);
  for (int kernel : {1, 3}) {  // 1x1: the GEMM writes dx directly; 3x3: col2im adds into zeros
    CAPTURE(kernel);
    Conv2d conv({.c_in = 5, .c_out = 7, .kernel = kernel, .bias = true}, init, Device::cpu(),
                DType::f64);
    check_overwrite_matches_add(conv, {2, 5, 6, 4}, Mode::train, rng);
    if (kernel == 3) {  // and Winograd's data gradient, which the measured rule keeps for maps
      ScopedWinogradUse always(cpu::WinogradUse::kAlways);  // larger than these
      check_overwrite_matches_add(conv, {2, 5, 6, 4}, Mode::train, rng);
    }
  }
  for (Mode mode : {Mode::train, Mode::eval}) {
    ConvBnSilu block(3, 4, 3, 2, -1, kYolov5Bn, init, Device::cpu(), DType::f64);
    check_overwrite_matches_add(block, {2, 3, 7, 6}, mode, rng);
    BatchNorm2d bn(3, kYolov5Bn, Device::cpu(), DType::f64);
    check_overwrite_matches_add(bn, {2, 3, 4, 5}, mode, rng);
  }
  Upsample upsample;
  check_overwrite_matches_add(upsample, {2, 3, 4, 5}, Mode::train, rng);
}

TEST_CASE("BatchNorm2d counts batches and updates running statistics only in training") {
  BatchNorm2d bn(2, {.eps = 1e-3, .momentum = 0.5});
  Tensor x = Tensor::from_vector(std::vector<float>{1, 3, 10, 30}, {2, 2, 1, 1});
  Tensor y = Tensor::empty(x.shape());
  bn.forward(std::array{x}, y, Mode::train);
  std::vector<StateEntry> state;
  bn.collect_state("", state);
  // channel 0 holds {1, 10}: mean 5.5, unbiased variance 40.5
  CHECK(state[2].value->to_vector<float>()[0] == doctest::Approx(0.5 * 0 + 0.5 * 5.5));
  CHECK(state[3].value->to_vector<float>()[0] == doctest::Approx(0.5 * 1 + 0.5 * 40.5));
  CHECK(state[4].value->to_vector<int64_t>()[0] == 1);
  bn.forward(std::array{x}, y, Mode::eval);
  CHECK(state[4].value->to_vector<int64_t>()[0] == 1);
}

// SyncBatchNorm finishes its statistics by its own op from the gathered moments (M2 in double),
// the single-process op inside the op; both by kernels/batchnorm_statistics.h. With one rank
// the gathered moments are the rank's own, so every value must be the op's, bit for bit, step
// after step (the running statistics feed back), in the plain and the fused (SiLU) forward.
TEST_CASE_TEMPLATE("SyncBatchNorm on one rank gives the op's statistics bit for bit", T, float,
                   double) {
  const DType dtype = std::is_same_v<T, float> ? DType::f32 : DType::f64;
  const std::unique_ptr<dist::Communicator> comm = dist::make_single_rank_communicator();
  const Shape4 shape{3, 5, 4, 7};
  Rng rng(63);
  for (const bool fused : {false, true}) {
    CAPTURE(fused);
    BatchNorm2d plain(shape.c, kYolov5Bn, Device::cpu(), dtype);
    BatchNorm2d synced(shape.c, kYolov5Bn, Device::cpu(), dtype);
    synced.set_sync(comm.get());
    for (int step = 0; step < 3; ++step) {
      // Far from zero, so the mean and M2 round differently in float than in double.
      const Tensor x = Tensor::from_vector(random_vector<T>(rng, shape.numel(), 40, 43), shape);
      Tensor y_plain = Tensor::empty(shape, Device::cpu(), dtype);
      Tensor y_synced = Tensor::empty(shape, Device::cpu(), dtype);
      if (fused) {
        plain.forward_silu(x, y_plain, Mode::train);
        synced.forward_silu(x, y_synced, Mode::train);
      } else {
        plain.forward(std::array{x}, y_plain, Mode::train);
        synced.forward(std::array{x}, y_synced, Mode::train);
      }
      CHECK(y_synced.to_vector<T>() == y_plain.to_vector<T>());
    }
    std::vector<StateEntry> plain_state, synced_state;
    plain.collect_state("", plain_state);
    synced.collect_state("", synced_state);
    REQUIRE(plain_state.size() == synced_state.size());
    for (size_t i = 0; i < plain_state.size(); ++i) {
      CAPTURE(plain_state[i].name);
      CHECK(synced_state[i].value->to_doubles() == plain_state[i].value->to_doubles());
    }
  }
}
