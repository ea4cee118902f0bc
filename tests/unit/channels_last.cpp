// tests/unit/channels_last.cpp — channels last (NHWC; kernels/view.h, --channels-last): tensors
// keep their values across layouts and slices, each op given channels-last views gives its NCHW
// bits, float and bf16 (the CPU runs it through NCHW copies: kernels/nchw_adapter.h; the op sets
// are tests/support/channels_last_ops.h, which the GPU's test runs against these), and the tiny
// network's forward, backward and SGD steps give NCHW's bits with every activation channels last.
#include <bit>
#include <cmath>
#include <functional>
#include <vector>

#include "kernels/nchw_adapter.h"
#include "kernels/ops.h"
#include "models/train/options.h"
#include "models/train/solver.h"
#include "tests/support/channels_last_ops.h"
#include "tests/support/channels_last_run.h"
#include "tests/support/random_tensor.h"

using namespace bareyolo;
using namespace bareyolo::testing;

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

TEST_CASE("channels-last ops give their NCHW bits, float and bf16, outputs poisoned") {
  const OpInputs in(72);
  for (const OpSet& set : channels_last_op_sets(in))
    for (DType dtype : {DType::f32, DType::bf16}) {
      INFO(set.name << ", " << dtype_name(dtype));
      const std::vector<Tensor> nchw = set.run(Layout::nchw, dtype, Device::cpu());
      const uint64_t copies = detail::nchw_copies_made.load();
      const std::vector<Tensor> last = set.run(Layout::channels_last, dtype, Device::cpu());
      CHECK(detail::nchw_copies_made.load() > copies);  // the CPU's kernels read NCHW copies
      CHECK(nan_count(nchw) == 0);
      REQUIRE(nchw.size() == last.size());
      for (size_t k = 0; k < nchw.size(); ++k) {
        INFO("result " << k);
        CHECK(last[k].to_doubles() == nchw[k].to_doubles());
      }
    }
}

TEST_CASE("channels-last concatenation gives NCHW's values") {
  Rng rng(73);
  const Tensor a = random_tensor(rng, {2, 3, 4, 5}), b = random_tensor(rng, {2, 4, 4, 5});
  std::vector<std::vector<double>> results;
  for (Layout layout : {Layout::nchw, Layout::channels_last}) {
    const Tensor al = laid_out(a, layout), bl = laid_out(b, layout);
    Tensor cat = poisoned({2, 7, 4, 5}, layout);
    ops::concat_forward<float>({al.view<float>(), bl.view<float>()}, cat.view<float>());
    results.push_back(cat.to_doubles());
  }
  // Each image: a's channels, then b's.
  std::vector<double> expected;
  for (int64_t n = 0; n < 2; ++n)
    for (const Tensor* part : {&a, &b})
      for (double v : part->images(n, n + 1).to_doubles()) expected.push_back(v);
  CHECK(results[0] == expected);
  CHECK(results[1] == expected);
}

TEST_CASE("add backward into one gradient for both inputs takes dy twice, NCHW and channels last") {
  // y = x + x: da and db are one tensor. Each sum is rounded to the storage type, as two
  // add_forwards would; a layout's or a widening's separate copies must not drop one of them.
  Rng rng(74);
  const Shape4 shape{2, 5, 3, 4};
  const Tensor g = random_tensor(rng, shape), dy = random_tensor(rng, shape);
  for (DType dtype : {DType::f32, DType::bf16})
    for (Layout layout : {Layout::nchw, Layout::channels_last}) {
      INFO(dtype_name(dtype) << ", " << layout_name(layout));
      Tensor both = laid_out(g.converted(dtype), layout);
      const Tensor d = laid_out(dy.converted(dtype), layout);
      if (dtype == DType::bf16)
        ops::add_backward<bf16>(d.view<bf16>(), both.view<bf16>(), both.view<bf16>());
      else
        ops::add_backward<float>(d.view<float>(), both.view<float>(), both.view<float>());
      const std::vector<double> g_values = g.converted(dtype).to_doubles(),
                                dy_values = dy.converted(dtype).to_doubles();
      std::vector<double> expected;
      for (size_t i = 0; i < g_values.size(); ++i) {
        float sum = float(g_values[i]);
        for (int twice = 0; twice < 2; ++twice) {
          sum += float(dy_values[i]);
          if (dtype == DType::bf16) sum = round_to_bf16(sum);
        }
        expected.push_back(sum);
      }
      CHECK(both.to_doubles() == expected);
    }
}

TEST_CASE("channels-last network: the tiny model's head, gradients and SGD steps are NCHW's") {
  for (bool amp : {false, true}) {
    INFO("amp " << amp);
    check_same_run(run_tiny(Layout::nchw, amp), run_tiny(Layout::channels_last, amp));
  }
}

TEST_CASE("channels-last option: on and off as asked, auto channels last on a GPU once opened") {
  const models::DeviceAbilities cpu{}, gpu{.gpu = true, .bf16_tensor_cores = true};
  const models::GatedDefaults shut{}, opened{.channels_last_on_gpus = true};
  models::TrainOptions options;
  CHECK_THROWS_AS(models::channels_last(options), std::logic_error);  // auto, unresolved
  auto resolved = [&](const models::DeviceAbilities& device, const models::GatedDefaults& gates) {
    return models::channels_last(models::resolved_for(options, device, gates));
  };
  CHECK_FALSE(resolved(cpu, shut));
  CHECK_FALSE(resolved(gpu, shut));
  CHECK_FALSE(resolved(cpu, opened));
  CHECK(resolved(gpu, opened));
  CHECK_FALSE(resolved(gpu, models::kGatedDefaults));  // this build: NCHW until a GPU run
  options.channels_last = models::ChannelsLastMode::on;
  CHECK(resolved(cpu, shut));
  options.channels_last = models::ChannelsLastMode::off;
  CHECK_FALSE(resolved(gpu, opened));
}

// Through the Solver, --amp keeps the convolutions' bf16 weights in the arena, KRSC in channels
// last (ParameterArena::keep_bf16_copies): the steps still give NCHW's bits.
TEST_CASE("channels-last Solver: --amp steps with KRSC weight copies give NCHW's bits") {
  std::vector<std::vector<double>> runs[2];
  for (bool channels_last : {false, true}) {
    models::DetectionModel model = tracking_model();
    const std::vector<TrackingBatch> data = tracking_batches();
    models::Solver solver(model, tracking_solver_options(data, channels_last));
    for (int64_t iteration = 0; iteration < 3; ++iteration) {
      const TrackingBatch& batch = data[size_t(iteration)];
      REQUIRE(solver.step(batch.images, batch.labels, iteration).updated);
    }
    for (const StateEntry& e : model.state()) runs[channels_last].push_back(e.value->to_doubles());
  }
  REQUIRE(runs[0].size() > 20);
  CHECK(runs[1] == runs[0]);
}
