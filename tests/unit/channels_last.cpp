// tests/unit/channels_last.cpp — channels last (NHWC; kernels/view.h, --channels-last): tensors
// keep their values across layouts and slices, each op given channels-last views gives its NCHW
// bits (the CPU runs it through NCHW copies: kernels/nchw_adapter.h), and the tiny network's
// forward, backward and SGD steps give NCHW's bits with every activation channels last.
#include <bit>
#include <cmath>
#include <functional>
#include <vector>

#include "kernels/ops.h"
#include "models/train/options.h"
#include "tests/support/channels_last_run.h"
#include "tests/support/random_tensor.h"

using namespace bareyolo;
using namespace bareyolo::testing;

namespace {

// Runs `op` on tensors made in NCHW and in channels last (the same values) and checks that every
// tensor it returns holds the same bits in both.
void check_same_bits(const std::function<std::vector<Tensor>(Layout)>& op) {
  const std::vector<Tensor> nchw = op(Layout::nchw), last = op(Layout::channels_last);
  REQUIRE(nchw.size() == last.size());
  for (size_t k = 0; k < nchw.size(); ++k) {
    INFO("result " << k);
    const std::vector<uint32_t> expected = bits_of(nchw[k]);
    int64_t nan = 0;
    for (uint32_t b : expected) nan += std::isnan(std::bit_cast<float>(b));
    CHECK(nan == 0);
    CHECK(bits_of(last[k]) == expected);
  }
}

}  // namespace

TEST_CASE("channels-last tensors keep their values across layouts, slices and devices' copies") {
  Rng rng(71);
  const Tensor values = random_tensor(rng, {2, 5, 3, 4});
  const Tensor last = laid_out(values, Layout::channels_last);
  CHECK(last.layout() == Layout::channels_last);
  CHECK(last.pixel_stride() == 5);
  CHECK(last.packed());
  CHECK_FALSE(last.dense());  // not NCHW's block
  CHECK(last.to_vector<float>() == values.to_vector<float>());
  // Element (1, 2, pixel 7 = row 1, column 3) lies at its channels-last place.
  const View<const float> v = last.view<float>();
  CHECK(v.data[1 * 60 + 7 * 5 + 2] == values.to_vector<float>()[size_t(1 * 60 + 2 * 12 + 7)]);
  CHECK(last.images(1, 2).to_vector<float>() == values.images(1, 2).to_vector<float>());
  // NCHW again by to(); bf16 in the same layout: the same values.
  CHECK(last.to(Device::cpu()).layout() == Layout::nchw);
  const Tensor narrow = last.converted(DType::bf16);
  CHECK(narrow.layout() == Layout::channels_last);
  CHECK(narrow.to_doubles() == values.converted(DType::bf16).to_doubles());

  // A channel slice of a channels-last tensor: written through copy_from, read back; the
  // channels around it keep their values.
  const Tensor slice_values = random_tensor(rng, {2, 2, 3, 4});
  Tensor slice = last.channels(1, 3);
  CHECK(slice.layout() == Layout::channels_last);
  CHECK_FALSE(slice.packed());
  slice.copy_from(slice_values);
  CHECK(slice.to_vector<float>() == slice_values.to_vector<float>());
  CHECK(last.channels(0, 1).to_vector<float>() == values.channels(0, 1).to_vector<float>());
  CHECK(last.channels(3, 5).to_vector<float>() == values.channels(3, 5).to_vector<float>());
  CHECK_THROWS_WITH_AS(slice.zero(), doctest::Contains("zero its whole tensor"), std::logic_error);

  // Where the layouts coincide (one channel, or one pixel) a tensor is NCHW.
  CHECK(Tensor::empty({2, 1, 3, 4}, Device::cpu(), DType::f32, Layout::channels_last).layout() ==
        Layout::nchw);
  CHECK(Tensor::empty({2, 6, 1, 1}, Device::cpu(), DType::f32, Layout::channels_last).layout() ==
        Layout::nchw);
  CHECK(Tensor::empty({1, 1, 1, 60}).prefix({1, 5, 3, 4}, Layout::channels_last).pixel_stride() ==
        5);
}

TEST_CASE("channels-last ops give their NCHW bits, outputs poisoned, a Concat slice included") {
  Rng rng(72);
  const Shape4 in{2, 6, 9, 7}, out{2, 8, 5, 4};
  const Tensor x = random_tensor(rng, in), weight = random_tensor(rng, {8, 6, 3, 3}, -0.3, 0.3);
  const Tensor dy = random_tensor(rng, out), dx_before = random_tensor(rng, in);
  const std::vector<float> bias = random_vector<float>(rng, 8);
  const ops::Conv2dParams stride2{2, 2, 1, 1};

  SUBCASE("convolution: forward with moments, backward data and weights") {
    check_same_bits([&](Layout layout) {
      const Tensor xl = laid_out(x, layout), dyl = laid_out(dy, layout);
      Tensor y = poisoned(out, layout), dx = laid_out(dx_before, layout);
      Tensor mean = Tensor::zeros({1, 8, 1, 1}), m2 = Tensor::zeros({1, 8, 1, 1});
      Tensor dweight = Tensor::zeros(weight.shape()), dbias = Tensor::zeros({1, 8, 1, 1});
      ops::conv2d_forward<float>(xl.view<float>(), weight.view<float>(), bias.data(), stride2,
                                 y.view<float>(), mean.view<float>().data, m2.view<float>().data);
      ops::conv2d_backward_data<float>(dyl.view<float>(), weight.view<float>(), stride2,
                                       dx.view<float>());  // adds into dx's values
      ops::conv2d_backward_weight<float>(xl.view<float>(), dyl.view<float>(), stride2,
                                         dweight.view<float>(), dbias.view<float>().data);
      return std::vector<Tensor>{y, dx, mean, m2, dweight, dbias};
    });
  }
  SUBCASE("convolution into a Concat's channel slice leaves the other channels") {
    const Tensor around = random_tensor(rng, {2, 11, 5, 4});
    check_same_bits([&](Layout layout) {
      Tensor concat = laid_out(around, layout);
      ops::conv2d_forward<float>(laid_out(x, layout).view<float>(), weight.view<float>(),
                                 bias.data(), stride2, concat.channels(2, 10).view<float>());
      return std::vector<Tensor>{concat};
    });
  }
  SUBCASE("fused BatchNorm + SiLU, forward and training backward") {
    const std::vector<float> mean = random_vector<float>(rng, 6),
                             gamma = random_vector<float>(rng, 6);
    const std::vector<float> beta = random_vector<float>(rng, 6);
    const std::vector<float> invstd = random_vector<float>(rng, 6, 0.5, 2);
    const Tensor dyx = random_tensor(rng, in);
    check_same_bits([&](Layout layout) {
      const Tensor xl = laid_out(x, layout), dyl = laid_out(dyx, layout);
      Tensor y = poisoned(in, layout), dx = poisoned(in, layout);
      std::vector<float> dgamma(6, 0.f), dbeta(6, 0.f);
      ops::batchnorm_silu_apply<float>(xl.view<float>(), mean.data(), invstd.data(), gamma.data(),
                                       beta.data(), y.view<float>());
      ops::batchnorm_silu_backward_train<float>(xl.view<float>(), dyl.view<float>(), gamma.data(),
                                                beta.data(), mean.data(), invstd.data(),
                                                dx.view<float>(), dgamma.data(), dbeta.data());
      return std::vector<Tensor>{y, dx, Tensor::from_vector(dgamma, {1, 6, 1, 1}),
                                 Tensor::from_vector(dbeta, {1, 6, 1, 1})};
    });
  }
  SUBCASE("SPPF's pools, upsampling, concatenation, add and SiLU") {
    const Tensor up = random_tensor(rng, {2, 6, 18, 14});
    check_same_bits([&](Layout layout) {
      const Tensor xl = laid_out(x, layout);
      Tensor y1 = poisoned(in, layout), y2 = poisoned(in, layout), y3 = poisoned(in, layout);
      ops::maxpool2d_chain3_forward<float>(xl.view<float>(), {5, 1, 2}, y1.view<float>(),
                                           y2.view<float>(), y3.view<float>());
      Tensor dpool = laid_out(dx_before, layout);
      ops::maxpool2d_backward<float>(xl.view<float>(), y1.view<float>(), {5, 1, 2},
                                     dpool.view<float>());
      Tensor upsampled = poisoned(up.shape(), layout), dsmall = poisoned(in, layout);
      ops::upsample_nearest2x_forward<float>(xl.view<float>(), upsampled.view<float>());
      ops::upsample_nearest2x_backward<float>(laid_out(up, layout).view<float>(),
                                              dsmall.view<float>(), ops::GradientWrite::overwrite);
      Tensor cat = poisoned({2, 12, 9, 7}, layout);
      ops::concat_forward<float>({xl.view<float>(), y2.view<float>()}, cat.view<float>());
      Tensor sum = poisoned(in, layout), dsilu = laid_out(dx_before, layout);
      ops::add_forward<float>(xl.view<float>(), y3.view<float>(), sum.view<float>());
      ops::silu_backward<float>(xl.view<float>(), y1.view<float>(), dsilu.view<float>());
      return std::vector<Tensor>{y1, y2, y3, dpool, upsampled, dsmall, cat, sum, dsilu};
    });
  }
}

TEST_CASE("channels-last network: the tiny model's head, gradients and SGD steps are NCHW's") {
  for (bool amp : {false, true}) {
    INFO("amp " << amp);
    check_same_run(run_tiny(Layout::nchw, amp), run_tiny(Layout::channels_last, amp));
  }
}

TEST_CASE("channels-last option: auto and off are NCHW, on is channels last") {
  models::TrainOptions options;
  CHECK_FALSE(models::channels_last(options));  // auto: NCHW for now
  options.channels_last = models::ChannelsLastMode::on;
  CHECK(models::channels_last(options));
  options.channels_last = models::ChannelsLastMode::off;
  CHECK_FALSE(models::channels_last(options));
}
