// tests/unit/weights.cpp — weights files (models/yolo/weights.h). In bf16: with_float_dtype
// halves the floating tensors' bytes and leaves the rest, a model loads bf16 weights as their
// exact float values, and the way back to fp32 is exact. Floats are checked where they enter,
// and F16 ones widen exactly (issue 52): a NaN inside weights once loaded silently (predict
// then reported "0 detections", train blamed lr0 and the labels), and `convert --dtype fp32`
// on an F16 file once copied the F16 tensors through and reported success.
#include "models/yolo/weights.h"

#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <map>

#include "engine/shipped_files.h"
#include "tests/support/testing.h"

using namespace bareyolo;
using namespace bareyolo::models;

namespace {
DetectionModel tiny_model(uint64_t seed) {
  return DetectionModel(load_model_config(shipped_file("models/yolov5-tiny.yaml")),
                        {.nc = 2, .seed = seed});
}

// `bits` as a record of dtype `dtype` (the element type's width must be the dtype's).
template <class Bits>
TensorRecord record_of(const std::string& name, const char* dtype, const std::vector<Bits>& bits) {
  TensorRecord record{
      name, dtype, {int64_t(bits.size())}, std::vector<uint8_t>(bits.size() * sizeof(Bits))};
  std::memcpy(record.bytes.data(), bits.data(), record.bytes.size());
  return record;
}

// `file` with the value at `index` of its record `name` (F32) set to `value`.
SafetensorsFile with_value(const SafetensorsFile& file, const std::string& name, size_t index,
                           float value) {
  SafetensorsFile changed;
  for (TensorRecord record : file.records()) {
    if (record.name == name) std::memcpy(record.bytes.data() + 4 * index, &value, 4);
    changed.add(std::move(record));
  }
  changed.metadata() = file.metadata();
  return changed;
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
  CHECK_THROWS_WITH_AS(with_float_dtype(fp32, DType::i64), doctest::Contains("F32, BF16 or F16"),
                       std::invalid_argument);
}

TEST_CASE("every F16 bit pattern widens to the float the CPU's F16C conversion gives") {
  for (uint32_t bits = 0; bits <= 0xFFFF; ++bits) {
    const float ours = f16_bits_to_float(uint16_t(bits)), cpu = _cvtsh_ss(uint16_t(bits));
    if (std::isnan(cpu))
      REQUIRE(std::isnan(ours));
    else
      REQUIRE(std::bit_cast<uint32_t>(ours) == std::bit_cast<uint32_t>(cpu));  // -0 too
  }
  CHECK(f16_bits_to_float(0x3C00) == 1.0f);
  CHECK(f16_bits_to_float(0x0001) == std::ldexp(1.0f, -24));  // the smallest subnormal
  CHECK(f16_bits_to_float(0xFBFF) == -65504.0f);
}

TEST_CASE("non-finite values are counted in every floating dtype, with the first index") {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
  const NonFiniteValues f32 = non_finite_values(record_of<float>("w", "F32", {1, nan, 2, -inf}));
  CHECK(f32.count == 2);
  CHECK(f32.first_index == 1);
  CHECK(non_finite_values(record_of<double>("a", "F64", {1, 2, std::nan("")})).first_index == 2);
  CHECK(non_finite_values(record_of<uint16_t>("b", "BF16", {0x3F80, 0xFF80})).count == 1);
  CHECK(non_finite_values(record_of<uint16_t>("h", "F16", {0x7C00, 0x3C00, 0x7E00})).count == 2);
  CHECK(non_finite_values(record_of<uint16_t>("h", "F16", {0x7BFF, 0x0001})).count == 0);
  CHECK(non_finite_values(record_of<int64_t>("n", "I64", {-1})).count == 0);  // not a float
}

TEST_CASE("weights holding NaN or infinity are refused naming file, tensor, count and index") {
  DetectionModel source = tiny_model(1);
  SafetensorsFile file;
  add_state(file, source.state());
  const std::string conv = "model.0.conv.weight";
  const SafetensorsFile damaged =
      with_value(with_value(file, conv, 17, std::nanf("")), conv, 20, INFINITY);

  DetectionModel target = tiny_model(2);
  const std::vector<float> before = target.state().front().value->to_vector<float>();
  CHECK_THROWS_WITH_AS(
      load_state(damaged, target.state(), "w.safetensors"),
      doctest::Contains("w.safetensors: tensor 'model.0.conv.weight' holds 2 non-finite values "
                        "(NaN or infinity) among its 864, the first at index 17; the weights "
                        "file is damaged"),
      std::invalid_argument);
  CHECK(target.state().front().value->to_vector<float>() == before);  // nothing copied

  // bf16 files are checked as well, and the anchors (read into a double buffer).
  CHECK_THROWS_WITH_AS(load_state(with_float_dtype(damaged, DType::bf16), target.state(), "w16"),
                       doctest::Contains("w16: tensor 'model.0.conv.weight' holds 2"),
                       std::invalid_argument);
  const SafetensorsFile bad_anchors = with_value(file, "model.24.anchors", 3, -INFINITY);
  CHECK_THROWS_WITH_AS(load_state(bad_anchors, target.state(), "a.safetensors"),
                       doctest::Contains("tensor 'model.24.anchors' holds 1 non-finite value "
                                         "(NaN or infinity) among its 18, the first at index 3"),
                       std::invalid_argument);
}

TEST_CASE("F16 weights convert to fp32 exactly and to bf16 by one rounding") {
  // Floats that F16 holds exactly: fp32 must give them back bit for bit.
  const std::vector<float> values = {1.0f, -0.5f, 65504.0f, std::ldexp(1.0f, -24), 0.0f, 3.140625f};
  std::vector<uint16_t> halves;
  for (float v : values) halves.push_back(_cvtss_sh(v, _MM_FROUND_TO_NEAREST_INT));
  SafetensorsFile f16;
  f16.add(record_of<uint16_t>("w", "F16", halves));
  f16.add_values<int64_t>("n", {7}, {});
  f16.metadata()["nc"] = "2";

  const SafetensorsFile fp32 = with_float_dtype(f16, DType::f32);
  CHECK(fp32.record("w").dtype == "F32");  // before: still F16
  CHECK(fp32.values<float>("w") == values);
  CHECK(fp32.record("n").dtype == "I64");
  CHECK(fp32.metadata() == f16.metadata());

  const SafetensorsFile bf16 = with_float_dtype(f16, DType::bf16);
  REQUIRE(bf16.record("w").dtype == "BF16");
  const std::vector<float> narrowed = bf16.float_tensor("w").to_vector<float>();
  for (size_t i = 0; i < values.size(); ++i) CHECK(narrowed[i] == round_to_bf16(values[i]));
}

TEST_CASE("fp32 weights narrow to F16 to nearest, and a tensor F16 cannot hold stays fp32") {
  // What a stripped checkpoint writes (YOLOv5's .half()); 65504 is the largest half, 65520
  // rounds to infinity.
  const std::vector<float> small = {1.0f, 0.1f, -2.5f, 65504.0f};
  SafetensorsFile fp32;
  fp32.add_values<float>("small", small, {4});
  fp32.add_values<float>("large", {1.0f, 65520.0f}, {2});
  fp32.add_values<int64_t>("count", {7}, {1});
  const SafetensorsFile half = with_float_dtype(fp32, DType::f16);
  const TensorRecord& narrowed = half.record("small");
  CHECK(narrowed.dtype == "F16");
  REQUIRE(narrowed.bytes.size() == 2 * small.size());
  for (size_t i = 0; i < small.size(); ++i) {
    uint16_t bits = 0;
    std::memcpy(&bits, narrowed.bytes.data() + 2 * i, 2);
    CHECK(bits == _cvtss_sh(small[i], _MM_FROUND_TO_NEAREST_INT));
  }
  CHECK(half.record("large").dtype == "F32");
  CHECK(half.values<float>("large") == std::vector<float>{1.0f, 65520.0f});
  CHECK(half.values<int64_t>("count") == std::vector<int64_t>{7});
}

TEST_CASE("a weights file's nc is read only within 1..kMaxClasses") {
  SafetensorsFile file;
  CHECK(metadata_nc(file, "w") == 0);  // none stated
  file.metadata()["nc"] = "80";
  CHECK(metadata_nc(file, "w") == 80);
  // Before: int(4294967298) == 2, a model of 2 classes built without a word.
  for (const char* text : {"4294967298", "0", "-3"}) {
    file.metadata()["nc"] = text;
    CHECK_THROWS_WITH_AS(metadata_nc(file, "w.safetensors"),
                         doctest::Contains((std::string("w.safetensors: metadata 'nc' is ") + text +
                                            ", outside 1..200000")
                                               .c_str()),
                         std::invalid_argument);
  }
}

TEST_CASE("F16 and BF16 weights load into a model as their exact float values") {
  DetectionModel source = tiny_model(3);
  SafetensorsFile fp32;
  add_state(fp32, source.state());
  // Random floats narrowed to each width: what the model holds after loading must be the
  // narrow value widened, bit for bit (the F16C instruction and to_float are the references).
  for (const char* dtype : {"F16", "BF16"}) {
    SafetensorsFile narrow;
    std::map<std::string, std::vector<float>> expected;
    for (const TensorRecord& record : fp32.records()) {
      if (record.dtype != "F32") {
        narrow.add(record);
        continue;
      }
      std::vector<float> values = fp32.values<float>(record.name);
      std::vector<uint16_t> bits;
      for (float& v : values) {
        bits.push_back(dtype == std::string("F16") ? _cvtss_sh(v, _MM_FROUND_TO_NEAREST_INT)
                                                   : to_bf16(v).bits);
        v = dtype == std::string("F16") ? _cvtsh_ss(bits.back()) : round_to_bf16(v);
      }
      TensorRecord bits_record = record_of<uint16_t>(record.name, dtype, bits);
      bits_record.shape = record.shape;
      narrow.add(std::move(bits_record));
      expected[record.name] = values;
    }
    DetectionModel target = tiny_model(4);
    load_state(narrow, target.state(), "narrow.safetensors");
    size_t checked = 0;
    for (const StateEntry& e : target.state()) {
      if (!expected.count(e.name)) continue;
      // Anchors are a double entry: the widened floats, widened once more.
      const std::vector<float>& want = expected[e.name];
      REQUIRE_MESSAGE(e.value->to_doubles() == std::vector<double>(want.begin(), want.end()),
                      dtype << " " << e.name);
      ++checked;
    }
    CHECK(checked == expected.size());
    CHECK(checked > 10);
  }
}

TEST_CASE("fine-tuning transfers the tensors whose name and shape match and keeps the others") {
  DetectionModel source(load_model_config(shipped_file("models/yolov5-tiny.yaml")),
                        {.nc = 3, .seed = 5});
  SafetensorsFile three_classes;
  add_state(three_classes, source.state());
  DetectionModel target = tiny_model(6);  // 2 classes: the head's 3 convolutions differ
  const std::vector<StateEntry> before = target.state();
  std::map<std::string, std::vector<double>> initial;
  for (const StateEntry& e : before) initial[e.name] = e.value->to_doubles();
  const std::vector<StateEntry> state = target.state();
  CHECK(transfer_state(three_classes, state, "w3") == state.size() - 6);
  CHECK(transfer_state(three_classes, state, "w3", "anchor") == state.size() - 7);
  for (const StateEntry& e : state) {
    INFO(e.name);
    const bool head = e.name.rfind("model.24.m.", 0) == 0;
    if (head)
      CHECK(e.value->to_doubles() == initial[e.name]);  // YOLOv5's initialisation kept
    else if (e.value->dtype() == DType::f32)
      CHECK(e.value->to_vector<float>() == three_classes.values<float>(e.name));
  }
  SafetensorsFile unrelated;
  unrelated.add_values<float>("other.weight", {1.0f}, {1});
  CHECK_THROWS_WITH_AS(transfer_state(unrelated, state, "u.safetensors"),
                       doctest::Contains("not one of the model's"), std::invalid_argument);
}
