// tests/cuda/decode.cpp — the Detect decode kernel, through models::decode_predictions of a head
// on the GPU, against the same call on the host (the CPU reference) on random logits, for a
// three-level model, rows poisoned first. Tolerance: float32, kFloatRtol / kFloatAtol (the GPU's
// expf is within 2 ulps of the CPU's).
#include "models/eval/decode.h"
#include "models/eval/detect_cuda.h"
#include "models/yolo/model_config.h"
#include "tests/cuda/cuda_testing.h"

using namespace bareyolo;
using namespace bareyolo::testing;

namespace {
// Three strided convs give the P3/8, P4/16 and P5/32 levels; YOLOv5's default anchors.
constexpr const char* kThreeLevelModel = R"(
nc: 3
depth_multiple: 1.0
width_multiple: 1.0
anchors:
  - [10,13, 16,30, 33,23]
  - [30,61, 62,45, 59,119]
  - [116,90, 156,198, 373,326]
backbone:
  - [-1, 1, Conv, [8, 3, 8]]
  - [-1, 1, Conv, [8, 3, 2]]
  - [-1, 1, Conv, [8, 3, 2]]
head:
  - [[0, 1, 2], 1, Detect, [nc, anchors]]
)";
}  // namespace

TEST_CASE("cuda detect decode equals the cpu decode") {
  models::DetectionModel model(
      models::parse_model_config(kThreeLevelModel, "three-level test model"));
  const int na = model.num_anchors(), no = model.outputs_per_anchor();
  Rng rng(91);
  const int64_t images = 2;
  std::vector<Tensor> head, head_on_gpu;
  for (int64_t size : {12, 6, 3}) {
    head.push_back(random_tensor(rng, {images, na * no, size, size}, -6, 6));
    head_on_gpu.push_back(head.back().to(Device::cuda(0)));
  }
  const std::vector<float> expected = models::decode_predictions(head, model).to_vector<float>();

  const int64_t rows_per_image = models::decoded_rows_per_image(head, model);
  Tensor rows = Tensor::empty({1, 1, 1, images * rows_per_image * no}, Device::cuda(0));
  cuda::fill_bytes(rows.view<float>().data, 0xFF, size_t(rows.numel()) * 4, 0);  // NaN
  models::decode_predictions(head_on_gpu, model, rows.view<float>());
  cuda::synchronize(0);
  check_close(rows.to_vector<float>(), expected, kFloatRtol, kFloatAtol, "decoded rows");
}

TEST_CASE("cuda detect decode refuses a head that does not match the level") {
  Tensor head = Tensor::zeros({1, 20, 4, 4}, Device::cuda(0));
  Tensor rows = Tensor::zeros({1, 1, 1, 48 * 7}, Device::cuda(0));
  models::DecodeLevel d;
  d.anchors = 3;
  d.outputs = 7;  // 21 channels expected
  d.rows_per_image = 48;
  CHECK_THROWS_AS(models::decode_level(head.view<float>(), d, rows.view<float>()),
                  std::invalid_argument);
}
