// tests/cuda/loss.cpp — the loss on the GPU against the CPU reference.
//  - The pointwise device ops (sigmoid, BCE-with-logits, forward and backward) on random
//    logits over a wide range (|x| up to 30, where a naive log(sigmoid) would overflow) and
//    random soft targets, dense and channel-slice views, outputs poisoned first. Tolerance:
//    float32, kFloatRtol / kFloatAtol (the GPU's expf and log1pf are within 2 ulps of the CPU's);
//    BCE's forward also a few float steps of its largest term (they cancel).
//  - YOLOv5's whole loss, yolo_loss<float> on device views (routed to cuda::yolo_loss) against
//    the host: random heads, random matched rows with several rows on one cell (the objectness
//    target of the last one wins), an empty level, label smoothing and pos_weights; both
//    gradients start from the same random values, since both losses add into them. Tolerances:
//    values 1e-10 relative (both evaluate each term in double with the same formulas, only the
//    order of the sums differs); gradients kFloatRtol / kFloatAtol (each element is a double
//    rounded to float, added in the same row order; the GPU's double exp/log1p/atan may differ from
//    glibc's by an ulp).
#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "kernels/ops.h"
#include "models/loss/head_loss.h"
#include "tests/cuda/cuda_testing.h"
#include "tests/support/random_matched_rows.h"

using namespace bareyolo;
using namespace bareyolo::testing;

TEST_CASE("cuda sigmoid forward and backward equal the cpu") {
  Rng rng(71);
  for (Shape4 s : {Shape4{1, 1, 1, 1}, Shape4{2, 3, 5, 7}, Shape4{3, 255, 20, 20}}) {
    Tensor x = random_tensor(rng, s, -30, 30);
    compare_cuda_with_cpu(
        {x}, {Tensor::empty(s)},
        [](auto& in, auto& out) {
          ops::sigmoid_forward<float>(in[0].template view<float>(), out[0].template view<float>());
        },
        "sigmoid forward");
    Tensor y = random_tensor(rng, s, 0, 1);
    compare_cuda_with_cpu(
        {y, random_tensor(rng, s)}, {random_tensor(rng, s)},
        [](auto& in, auto& out) {
          ops::sigmoid_backward<float>(in[0].template view<float>(), in[1].template view<float>(),
                                       out[0].template view<float>());
        },
        "sigmoid backward", false);
  }
}

TEST_CASE("cuda BCE with logits forward and backward equal the cpu") {
  Rng rng(72);
  for (float pos_weight : {1.0f, 2.5f})
    for (Shape4 s : {Shape4{1, 1, 1, 1}, Shape4{2, 3, 5, 7}, Shape4{3, 85, 20, 20}}) {
      Tensor x = random_tensor(rng, s, -30, 30), t = random_tensor(rng, s, 0, 1);
      compare_cuda_with_cpu(
          {x, t}, {Tensor::empty(s)},
          [pos_weight](auto& in, auto& out) {
            ops::bce_with_logits_forward<float>(in[0].template view<float>(),
                                                in[1].template view<float>(), pos_weight,
                                                out[0].template view<float>());
          },
          // Terms up to pos_weight |x| (|x| <= 30) cancel to a small loss, and the GPU fuses a
          // product into a multiply-add the CPU may round twice: the two differ by float steps
          // of the terms (seen: 1.4e-6 at pos_weight 1), not of the loss.
          "bce forward", true, kFloatRtol,
          4 * 30 * pos_weight * std::numeric_limits<float>::epsilon());
      compare_cuda_with_cpu(
          {x, t, random_tensor(rng, s)}, {random_tensor(rng, s)},
          [pos_weight](auto& in, auto& out) {
            ops::bce_with_logits_backward<float>(
                in[0].template view<float>(), in[1].template view<float>(), pos_weight,
                in[2].template view<float>(), out[0].template view<float>());
          },
          "bce backward", false);
    }
}

TEST_CASE("cuda BCE on channel slices equals the cpu") {
  Rng rng(73);
  const Shape4 parent{4, 12, 6, 5};
  Tensor x = random_tensor(rng, parent, -8, 8), t = random_tensor(rng, parent, 0, 1);
  compare_cuda_with_cpu(
      {x, t}, {Tensor::empty(parent)},
      [](auto& in, auto& out) {
        Tensor loss = out[0].channels(0, 7);
        ops::bce_with_logits_forward<float>(in[0].channels(5, 12).template view<float>(),
                                            in[1].channels(1, 8).template view<float>(), 1.0f,
                                            loss.template view<float>());
        out[0].channels(7, 12).zero();
      },
      "bce forward on slices");
}

namespace {

// Cells named by more than one row, over all levels.
int shared_cells(const models::LevelTargets& targets) {
  int shared = 0;
  for (const auto& rows : targets)
    for (size_t k = 0; k < rows.size(); ++k)
      for (size_t j = 0; j < k; ++j)
        if (rows[j].image == rows[k].image && rows[j].anchor == rows[k].anchor &&
            rows[j].gj == rows[k].gj && rows[j].gi == rows[k].gi) {
          ++shared;
          break;
        }
  return shared;
}

void check_device_loss_equals_host(const std::vector<Tensor>& head,
                                   const models::LevelTargets& targets,
                                   const models::LossNormalization& norm,
                                   const models::LossOptions& options, Rng& rng) {
  std::vector<Tensor> host_gradients, device_head, device_gradients;
  std::vector<View<const float>> host_views, device_views;
  std::vector<View<float>> host_gradient_views, device_gradient_views;
  for (const Tensor& h : head) {
    // Both losses add into the gradient: both start from the same random values.
    host_gradients.push_back(random_tensor(rng, h.shape(), -1, 1));
    host_views.push_back(h.view<float>());
    host_gradient_views.push_back(host_gradients.back().view<float>());
    device_head.push_back(h.to(Device::cuda(0)));
    device_gradients.push_back(host_gradients.back().to(Device::cuda(0)));
    device_views.push_back(std::as_const(device_head.back()).view<float>());
    device_gradient_views.push_back(device_gradients.back().view<float>());
  }
  const models::LossValues expected =
      models::yolo_loss<float>(host_views, targets, norm, options, host_gradient_views);
  const models::LossValues actual =
      models::yolo_loss<float>(device_views, targets, norm, options, device_gradient_views);
  cuda::synchronize(0);
  const std::pair<double, double> values[] = {{actual.box, expected.box},
                                              {actual.obj, expected.obj},
                                              {actual.cls, expected.cls},
                                              {actual.total, expected.total}};
  for (const auto& [a, e] : values) {
    CAPTURE(a);
    CAPTURE(e);
    CHECK(std::fabs(a - e) <= 1e-10 * std::fabs(e));
  }
  for (size_t level = 0; level < head.size(); ++level) {
    CAPTURE(level);
    check_close(device_gradients[level].to_vector<float>(),
                host_gradients[level].to_vector<float>(), kFloatRtol, kFloatAtol, "loss gradient");
  }
}

}  // namespace

TEST_CASE("cuda yolo loss equals the cpu loss on random heads and rows") {
  for (int classes : {1, 4}) {
    CAPTURE(classes);
    Rng rng(74 + uint64_t(classes));
    const int images = 3, anchors = 3, outputs = classes + 5;
    const int sizes[] = {8, 4, 2};
    std::vector<Tensor> head;
    models::LevelTargets targets;
    for (int level = 0; level < 3; ++level) {
      const Shape4 shape{images, anchors * outputs, sizes[level], sizes[level]};
      head.push_back(random_tensor(rng, shape, -4, 4));
      // Level 2 matches nothing: its objectness targets are all 0.
      targets.push_back(level == 2 ? std::vector<models::MatchedRow>{}
                                   : random_matched_rows(rng, level == 0 ? 60 : 25, images, anchors,
                                                         sizes[level], sizes[level], classes));
    }
    REQUIRE(shared_cells(targets) >= 10);
    models::LossOptions options{models::scale_loss_gains({}, 3, classes, 320), classes};
    options.hyp.label_smoothing = 0.1;
    options.hyp.cls_pw = 1.3;
    options.hyp.obj_pw = 0.8;
    models::LossNormalization norm = models::local_normalization(targets, images);
    check_device_loss_equals_host(head, targets, norm, options, rng);
    // Data parallelism's form: global counts larger than the local ones, scaled gradients.
    norm.matched_rows = {150, 70, 12};
    norm.images = 8;
    norm.gradient_scale = 4;
    check_device_loss_equals_host(head, targets, norm, options, rng);
  }
}

TEST_CASE("cuda head_loss of build_targets' rows equals the cpu head_loss") {
  Rng rng(78);
  const int images = 4, classes = 5, outputs = classes + 5;
  std::vector<models::LabelRow> labels;
  for (int k = 0; k < 40; ++k) {
    const std::vector<double> u = random_vector(rng, 4, 0, 1);
    labels.push_back({random_int(rng, 0, images - 1), random_int(rng, 0, classes - 1),
                      float(0.05 + 0.9 * u[0]), float(0.05 + 0.9 * u[1]), float(0.02 + 0.4 * u[2]),
                      float(0.02 + 0.4 * u[3])});
  }
  std::vector<models::LevelGrid> grids;
  std::vector<Tensor> head;
  for (int size : {16, 8, 4}) {
    models::LevelGrid grid{size, size, {}};
    for (int a = 0; a < 3; ++a)
      grid.anchors.push_back({0.5 + 1.5 * a * 16 / size, 0.8 + a * 16.0 / size});
    grids.push_back(grid);
    head.push_back(random_tensor(rng, {images, 3 * outputs, size, size}, -3, 3));
  }
  const models::LevelTargets targets = models::build_targets(labels, grids, 4.0);
  REQUIRE(!targets[0].empty());
  const models::LossOptions options{models::scale_loss_gains({}, 3, classes, 128), classes};
  const models::LossNormalization norm = models::local_normalization(targets, images);
  std::vector<Tensor> device_head;
  for (const Tensor& h : head) device_head.push_back(h.to(Device::cuda(0)));
  const models::HeadLoss expected = models::head_loss(head, targets, norm, options);
  const models::HeadLoss actual = models::head_loss(device_head, targets, norm, options);
  CHECK(actual.values.total == doctest::Approx(expected.values.total).epsilon(1e-10));
  REQUIRE(actual.gradients.size() == head.size());
  for (size_t level = 0; level < head.size(); ++level) {
    CHECK(actual.gradients[level].device() == Device::cuda(0));
    check_close(actual.gradients[level].to_vector<float>(),
                expected.gradients[level].to_vector<float>(), kFloatRtol, kFloatAtol,
                "head_loss gradient");
  }
}
