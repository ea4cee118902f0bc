// tests/unit/weights.cpp — weights files in bf16 (models/yolo/weights.h): with_float_dtype
// halves the floating tensors' bytes and leaves the rest, a model loads bf16 weights as their
// exact float values, and the way back to fp32 is exact.
#include "models/yolo/weights.h"
#include "engine/shipped_files.h"
#include "tests/support/testing.h"

using namespace bareyolo;
using namespace bareyolo::models;

namespace {
DetectionModel tiny_model(uint64_t seed) {
  return DetectionModel(load_model_config(shipped_file("models/yolov5-tiny.yaml")),
                        {.nc = 2, .seed = seed});
}
}  // namespace

TEST_CASE("bf16 weights: half the bytes, loaded as their float values, back to fp32 exactly") {
  DetectionModel source = tiny_model(1);
  SafetensorsFile fp32;
  add_state(fp32, source.state());
  fp32.metadata()["nc"] = "2";
  const SafetensorsFile bf16 = with_float_dtype(fp32, DType::bf16);
  CHECK(bf16.metadata() == fp32.metadata());
  REQUIRE(bf16.records().size() == fp32.records().size());
  size_t floating_bytes = 0, narrowed_bytes = 0;
  for (size_t i = 0; i < fp32.records().size(); ++i) {
    const TensorRecord &wide = fp32.records()[i], &narrow = bf16.records()[i];
    CHECK(narrow.name == wide.name);
    CHECK(narrow.shape == wide.shape);
    if (wide.dtype == "F32") {
      CHECK(narrow.dtype == "BF16");
      floating_bytes += wide.bytes.size(), narrowed_bytes += narrow.bytes.size();
    } else {
      CHECK(narrow.dtype == wide.dtype);  // the counters stay I64, the anchors F64
      CHECK(narrow.bytes == wide.bytes);
    }
  }
  CHECK(floating_bytes > 100000);
  CHECK(narrowed_bytes * 2 == floating_bytes);

  // Into a model of other values: each floating entry is the source's, rounded to bf16.
  DetectionModel target = tiny_model(2);
  const SafetensorsFile parsed = SafetensorsFile::parse(bf16.serialize(), "memory");
  load_state(parsed, target.state(), "w16.safetensors");
  const std::vector<StateEntry> want = source.state(), got = target.state();
  int64_t rounded = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (want[i].value->dtype() != DType::f32) continue;
    const std::vector<float> a = want[i].value->to_vector<float>(),
                             b = got[i].value->to_vector<float>();
    for (size_t k = 0; k < a.size(); ++k) {
      REQUIRE(b[k] == round_to_bf16(a[k]));
      rounded += b[k] != a[k];
    }
  }
  CHECK(rounded > 1000);

  // And back: F32 again, holding exactly the bf16 values.
  const SafetensorsFile widened = with_float_dtype(bf16, DType::f32);
  for (const TensorRecord& record : widened.records())
    if (record.dtype == "F32")
      CHECK(widened.tensor(record.name).to_vector<float>() ==
            bf16.tensor(record.name).converted(DType::f32).to_vector<float>());
  CHECK_THROWS_WITH_AS(with_float_dtype(fp32, DType::i64), doctest::Contains("F32 or BF16"),
                       std::invalid_argument);
}
