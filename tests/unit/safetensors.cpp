// tests/unit/safetensors.cpp — the safetensors reader and writer: round trips of every kind
// of record (0-d, empty, several dtypes, engine Tensors), byte-for-byte agreement with the
// reference implementation in both directions, one check per corruption the reader must
// refuse, and the atomic save.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

#include "engine/safetensors.h"
#include "tests/support/testing.h"

namespace bareyolo {
namespace {

namespace fs = std::filesystem;

// Written by the reference implementation (Python `safetensors` 0.8.0, numpy 2.4);
// regenerate with tools/make_safetensors_fixture.py. It holds, in the reference writer's
// order: model.0.bn.num_batches_tracked I64 [] = 7, model.0.bn.running_var F64 [3] =
// {0.25, 1, 1e-3}, empty F32 [0,3], model.0.conv.weight F32 [2,1,1,2] = {0.5, -1.25, 2,
// 3.75}, half F16 [2] = {1.5, -2}, mask U8 [3] = {1, 0, 255}; metadata
// {"bareyolo": "{\"epoch\": 3}"}.
const std::vector<uint8_t> kPythonFixture = {
    0xd0, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x7b, 0x22, 0x5f, 0x5f, 0x6d, 0x65, 0x74, 0x61,
    0x64, 0x61, 0x74, 0x61, 0x5f, 0x5f, 0x22, 0x3a, 0x7b, 0x22, 0x62, 0x61, 0x72, 0x65, 0x79, 0x6f,
    0x6c, 0x6f, 0x22, 0x3a, 0x22, 0x7b, 0x5c, 0x22, 0x65, 0x70, 0x6f, 0x63, 0x68, 0x5c, 0x22, 0x3a,
    0x20, 0x33, 0x7d, 0x22, 0x7d, 0x2c, 0x22, 0x6d, 0x6f, 0x64, 0x65, 0x6c, 0x2e, 0x30, 0x2e, 0x62,
    0x6e, 0x2e, 0x6e, 0x75, 0x6d, 0x5f, 0x62, 0x61, 0x74, 0x63, 0x68, 0x65, 0x73, 0x5f, 0x74, 0x72,
    0x61, 0x63, 0x6b, 0x65, 0x64, 0x22, 0x3a, 0x7b, 0x22, 0x64, 0x74, 0x79, 0x70, 0x65, 0x22, 0x3a,
    0x22, 0x49, 0x36, 0x34, 0x22, 0x2c, 0x22, 0x73, 0x68, 0x61, 0x70, 0x65, 0x22, 0x3a, 0x5b, 0x5d,
    0x2c, 0x22, 0x64, 0x61, 0x74, 0x61, 0x5f, 0x6f, 0x66, 0x66, 0x73, 0x65, 0x74, 0x73, 0x22, 0x3a,
    0x5b, 0x30, 0x2c, 0x38, 0x5d, 0x7d, 0x2c, 0x22, 0x6d, 0x6f, 0x64, 0x65, 0x6c, 0x2e, 0x30, 0x2e,
    0x62, 0x6e, 0x2e, 0x72, 0x75, 0x6e, 0x6e, 0x69, 0x6e, 0x67, 0x5f, 0x76, 0x61, 0x72, 0x22, 0x3a,
    0x7b, 0x22, 0x64, 0x74, 0x79, 0x70, 0x65, 0x22, 0x3a, 0x22, 0x46, 0x36, 0x34, 0x22, 0x2c, 0x22,
    0x73, 0x68, 0x61, 0x70, 0x65, 0x22, 0x3a, 0x5b, 0x33, 0x5d, 0x2c, 0x22, 0x64, 0x61, 0x74, 0x61,
    0x5f, 0x6f, 0x66, 0x66, 0x73, 0x65, 0x74, 0x73, 0x22, 0x3a, 0x5b, 0x38, 0x2c, 0x33, 0x32, 0x5d,
    0x7d, 0x2c, 0x22, 0x65, 0x6d, 0x70, 0x74, 0x79, 0x22, 0x3a, 0x7b, 0x22, 0x64, 0x74, 0x79, 0x70,
    0x65, 0x22, 0x3a, 0x22, 0x46, 0x33, 0x32, 0x22, 0x2c, 0x22, 0x73, 0x68, 0x61, 0x70, 0x65, 0x22,
    0x3a, 0x5b, 0x30, 0x2c, 0x33, 0x5d, 0x2c, 0x22, 0x64, 0x61, 0x74, 0x61, 0x5f, 0x6f, 0x66, 0x66,
    0x73, 0x65, 0x74, 0x73, 0x22, 0x3a, 0x5b, 0x33, 0x32, 0x2c, 0x33, 0x32, 0x5d, 0x7d, 0x2c, 0x22,
    0x6d, 0x6f, 0x64, 0x65, 0x6c, 0x2e, 0x30, 0x2e, 0x63, 0x6f, 0x6e, 0x76, 0x2e, 0x77, 0x65, 0x69,
    0x67, 0x68, 0x74, 0x22, 0x3a, 0x7b, 0x22, 0x64, 0x74, 0x79, 0x70, 0x65, 0x22, 0x3a, 0x22, 0x46,
    0x33, 0x32, 0x22, 0x2c, 0x22, 0x73, 0x68, 0x61, 0x70, 0x65, 0x22, 0x3a, 0x5b, 0x32, 0x2c, 0x31,
    0x2c, 0x31, 0x2c, 0x32, 0x5d, 0x2c, 0x22, 0x64, 0x61, 0x74, 0x61, 0x5f, 0x6f, 0x66, 0x66, 0x73,
    0x65, 0x74, 0x73, 0x22, 0x3a, 0x5b, 0x33, 0x32, 0x2c, 0x34, 0x38, 0x5d, 0x7d, 0x2c, 0x22, 0x68,
    0x61, 0x6c, 0x66, 0x22, 0x3a, 0x7b, 0x22, 0x64, 0x74, 0x79, 0x70, 0x65, 0x22, 0x3a, 0x22, 0x46,
    0x31, 0x36, 0x22, 0x2c, 0x22, 0x73, 0x68, 0x61, 0x70, 0x65, 0x22, 0x3a, 0x5b, 0x32, 0x5d, 0x2c,
    0x22, 0x64, 0x61, 0x74, 0x61, 0x5f, 0x6f, 0x66, 0x66, 0x73, 0x65, 0x74, 0x73, 0x22, 0x3a, 0x5b,
    0x34, 0x38, 0x2c, 0x35, 0x32, 0x5d, 0x7d, 0x2c, 0x22, 0x6d, 0x61, 0x73, 0x6b, 0x22, 0x3a, 0x7b,
    0x22, 0x64, 0x74, 0x79, 0x70, 0x65, 0x22, 0x3a, 0x22, 0x55, 0x38, 0x22, 0x2c, 0x22, 0x73, 0x68,
    0x61, 0x70, 0x65, 0x22, 0x3a, 0x5b, 0x33, 0x5d, 0x2c, 0x22, 0x64, 0x61, 0x74, 0x61, 0x5f, 0x6f,
    0x66, 0x66, 0x73, 0x65, 0x74, 0x73, 0x22, 0x3a, 0x5b, 0x35, 0x32, 0x2c, 0x35, 0x35, 0x5d, 0x7d,
    0x7d, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x07, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xd0, 0x3f, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xf0, 0x3f,
    0xfc, 0xa9, 0xf1, 0xd2, 0x4d, 0x62, 0x50, 0x3f, 0x00, 0x00, 0x00, 0x3f, 0x00, 0x00, 0xa0, 0xbf,
    0x00, 0x00, 0x00, 0x40, 0x00, 0x00, 0x70, 0x40, 0x00, 0x3e, 0x00, 0xc0, 0x01, 0x00, 0xff,
};

// The fixture's content, built with our API in the reference writer's order.
SafetensorsFile fixture_content() {
  SafetensorsFile file;
  file.metadata()["bareyolo"] = R"({"epoch": 3})";
  file.add_values<int64_t>("model.0.bn.num_batches_tracked", {7}, {});
  file.add_values<double>("model.0.bn.running_var", {0.25, 1.0, 1e-3}, {3});
  file.add_values<float>("empty", {}, {0, 3});
  file.add_values<float>("model.0.conv.weight", {0.5f, -1.25f, 2.0f, 3.75f}, {2, 1, 1, 2});
  file.add({"half", "F16", {2}, {0x00, 0x3e, 0x00, 0xc0}});  // 1.5, -2.0 as IEEE half
  file.add_values<uint8_t>("mask", {1, 0, 255}, {3});
  return file;
}

// The message of the exception `action` throws, or "" when it throws none.
std::string error_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

// A file image from a raw header text and data buffer, for building damaged files.
std::vector<uint8_t> file_image(const std::string& header, const std::vector<uint8_t>& data) {
  uint64_t length = header.size();
  std::vector<uint8_t> bytes(8 + header.size() + data.size());
  std::memcpy(bytes.data(), &length, 8);
  std::copy(header.begin(), header.end(), bytes.begin() + 8);
  std::copy(data.begin(), data.end(), bytes.begin() + 8 + static_cast<ptrdiff_t>(header.size()));
  return bytes;
}

// A fresh directory under the system temp directory, removed with its contents at the end.
struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& name)
      : path(fs::temp_directory_path() / ("bareyolo_" + name + "_" + std::to_string(::getpid()))) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::vector<std::string> entries() const {
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(path)) names.push_back(entry.path().filename());
    std::sort(names.begin(), names.end());
    return names;
  }
};

std::vector<uint8_t> read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void check_same_records(const SafetensorsFile& actual, const SafetensorsFile& expected) {
  REQUIRE(actual.records().size() == expected.records().size());
  for (size_t i = 0; i < expected.records().size(); ++i) {
    const TensorRecord& a = actual.records()[i];
    const TensorRecord& e = expected.records()[i];
    CAPTURE(e.name);
    CHECK(a.name == e.name);
    CHECK(a.dtype == e.dtype);
    CHECK(a.shape == e.shape);
    CHECK(a.bytes == e.bytes);
  }
  CHECK(actual.metadata() == expected.metadata());
}

}  // namespace

TEST_CASE("safetensors round trip keeps dtypes shapes values and metadata") {
  testing::Rng rng(11);
  SafetensorsFile file;
  file.add_values<float>("weight", testing::random_vector<float>(rng, 6), {2, 3});
  file.add_values<double>("running_mean", {1.0, -2.5, 1e-300}, {3});
  file.add_values<int64_t>("num_batches_tracked", {123456789012345}, {});  // 0-d
  file.add_values<float>("no_rows", {}, {0, 4});                           // empty
  file.add_values<int32_t>("grid", {1, -2, 3, -4}, {2, 2});
  file.add_values<uint8_t>("flags", {0, 1, 2, 3, 255}, {5});
  file.add({"bf16_raw", "BF16", {1}, {0x80, 0x3f}});
  file.metadata()["format"] = "pt";
  file.metadata()["config"] = R"({"epoch": 3, "names": ["a", "b"]})";

  std::vector<uint8_t> bytes = file.serialize();
  uint64_t header_bytes = 0;
  std::memcpy(&header_bytes, bytes.data(), 8);
  CHECK(header_bytes % 8 == 0);

  SafetensorsFile parsed = SafetensorsFile::parse(bytes, "memory");
  check_same_records(parsed, file);  // same order: data is laid out as records were added
  CHECK(parsed.values<int64_t>("num_batches_tracked") == std::vector<int64_t>{123456789012345});
  CHECK(parsed.record("num_batches_tracked").shape.empty());
  CHECK(parsed.values<double>("running_mean")[2] == 1e-300);
  CHECK(parsed.values<float>("no_rows").empty());

  TempDir dir("roundtrip");
  std::string path = dir.path / "model.safetensors";
  file.save(path);
  CHECK(read_bytes(path) == bytes);
  check_same_records(SafetensorsFile::load(path), file);
}

TEST_CASE("the metadata alone is read from the header, without the tensors") {
  TempDir dir("metadata_only");
  SafetensorsFile file;
  file.add_values<float>("w", std::vector<float>(1000, 0.5f), {10, 100});
  file.metadata()["config"] = "{\"batch\": 16}";
  file.metadata()["nc"] = "3";
  const std::string path = (dir.path / "f.safetensors").string();
  file.save(path);
  const SafetensorsFile header = SafetensorsFile::load_metadata(path);
  CHECK(header.metadata() == SafetensorsFile::load(path).metadata());
  CHECK(header.records().empty());
  // A header that runs past the file's end fails as load() fails, naming the file.
  std::vector<uint8_t> bytes = file.serialize();
  bytes.resize(40);
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), 40);
  CHECK_THROWS_WITH_AS(SafetensorsFile::load_metadata(path),
                       doctest::Contains("runs past the end of the 40-byte file"),
                       std::runtime_error);
  std::ofstream(path, std::ios::binary | std::ios::trunc).write("abc", 3);
  CHECK_THROWS_WITH_AS(SafetensorsFile::load_metadata(path), doctest::Contains("too short"),
                       std::runtime_error);
}

TEST_CASE("integer metadata is read or refused with the file, key and text") {
  // Before: "stoi" for a non-numeric nc in a weights file's metadata.
  SafetensorsFile file;
  file.metadata()["nc"] = "12";
  file.metadata()["bad"] = "abc";
  file.metadata()["tail"] = "3x";
  file.metadata()["empty"] = "";
  CHECK(file.metadata_integer("nc", "w.safetensors") == 12);
  CHECK_THROWS_WITH_AS(file.metadata_integer("bad", "w.safetensors"),
                       "w.safetensors: metadata 'bad' is 'abc', not a whole number",
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(file.metadata_integer("tail", "w"), doctest::Contains("'3x', not a whole"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(file.metadata_integer("empty", "w"), doctest::Contains("'', not a whole"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(file.metadata_integer("none", "w"), "w: the metadata has no 'none' entry",
                       std::invalid_argument);
}

TEST_CASE("safetensors converts engine Tensors of 0 to 4 dims") {
  std::vector<float> values = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  Tensor batch = Tensor::from_vector(values, {2, 3, 1, 2});
  SafetensorsFile file;
  // Channels [1, 3) of a batch: not dense, so the writer must gather the two images.
  file.add_tensor("slice", batch.channels(1, 3), {2, 2, 2});
  file.add_tensor("bias", Tensor::from_vector(std::vector<float>{0.5f, -0.5f}, {1, 1, 1, 2}), {2});
  file.add_tensor("conv", batch, {2, 3, 1, 2});
  file.add_tensor("scalar", Tensor::from_vector(std::vector<double>{2.5}, {1, 1, 1, 1}), {});
  file.add_values<int64_t>("count", {42}, {});

  SafetensorsFile parsed = SafetensorsFile::parse(file.serialize(), "memory");
  CHECK(parsed.values<float>("slice") == std::vector<float>{3, 4, 5, 6, 9, 10, 11, 12});

  Tensor slice = parsed.tensor("slice");
  CHECK(slice.shape() == Shape4{1, 2, 2, 2});  // dims aligned to the right of (n, c, h, w)
  CHECK(slice.to_vector<float>() == std::vector<float>{3, 4, 5, 6, 9, 10, 11, 12});
  CHECK(parsed.tensor("bias").shape() == Shape4{1, 1, 1, 2});
  CHECK(parsed.tensor("conv").shape() == Shape4{2, 3, 1, 2});
  CHECK(parsed.tensor("conv").to_vector<float>() == values);
  Tensor scalar = parsed.tensor("scalar");
  CHECK(scalar.dtype() == DType::f64);
  CHECK(scalar.shape() == Shape4{1, 1, 1, 1});
  CHECK(scalar.to_vector<double>() == std::vector<double>{2.5});
  CHECK(parsed.tensor("count").dtype() == DType::i64);

  SafetensorsFile five_d;
  five_d.add_values<float>("x", {1, 2}, {1, 1, 1, 1, 2});
  CHECK(error_of([&] { five_d.tensor("x"); }).find("5-d") != std::string::npos);
  CHECK(error_of([&] { file.add_tensor("wrong", batch, {5}); }).find("12 elements") !=
        std::string::npos);
  SafetensorsFile bytes_only;
  bytes_only.add_values<int32_t>("indices", {1}, {1});
  CHECK(error_of([&] { bytes_only.tensor("indices"); }).find("cannot hold") != std::string::npos);
}

TEST_CASE("safetensors reads the bytes the reference implementation writes") {
  SafetensorsFile file = SafetensorsFile::parse(kPythonFixture, "python fixture");
  check_same_records(file, fixture_content());
  CHECK(file.values<int64_t>("model.0.bn.num_batches_tracked") == std::vector<int64_t>{7});
  CHECK(file.values<float>("model.0.conv.weight") == std::vector<float>{0.5f, -1.25f, 2.0f, 3.75f});
  CHECK(file.record("model.0.conv.weight").shape == std::vector<int64_t>{2, 1, 1, 2});
  CHECK(file.metadata().at("bareyolo") == R"({"epoch": 3})");
}

TEST_CASE("safetensors writes the bytes the reference implementation writes") {
  CHECK(fixture_content().serialize() == kPythonFixture);
  // Its header is padded with spaces to the next multiple of 8, an aligned one not at all:
  // over eight metadata lengths, every remainder comes up once.
  for (size_t extra = 0; extra < 8; ++extra) {
    CAPTURE(extra);
    SafetensorsFile file;
    file.metadata()["key"] = std::string(extra, 'v');
    file.add_values<float>("x", {1}, {1});
    const std::vector<uint8_t> bytes = file.serialize();
    uint64_t header_bytes = 0;
    std::memcpy(&header_bytes, bytes.data(), sizeof(header_bytes));
    const std::string header(bytes.begin() + 8, bytes.begin() + 8 + int64_t(header_bytes));
    const size_t unpadded = header.find_last_not_of(' ') + 1;
    CHECK(header_bytes % 8 == 0);
    CHECK(header_bytes - unpadded < 8);
  }
}

TEST_CASE("safetensors refuses corrupt files with a message naming the problem") {
  // A valid two-tensor file, then one damage per case. "a" is F32 [2] at [0, 8), "b" I64 []
  // at [8, 16).
  const std::vector<uint8_t> data(16, 0x11);
  auto header = [](const std::string& a_info, const std::string& b_info) {
    return R"({"a":)" + a_info + R"(,"b":)" + b_info + "}";
  };
  const std::string a_ok = R"({"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  const std::string b_ok = R"({"dtype":"I64","shape":[],"data_offsets":[8,16]})";
  const std::vector<uint8_t> valid = file_image(header(a_ok, b_ok), data);
  REQUIRE(SafetensorsFile::parse(valid, "x.safetensors").records().size() == 2);

  auto error_parsing = [](const std::vector<uint8_t>& bytes) {
    return error_of([&] { SafetensorsFile::parse(bytes, "x.safetensors"); });
  };
  auto check_refused = [&](const std::vector<uint8_t>& bytes, const std::string& expected) {
    std::string message = error_parsing(bytes);
    CAPTURE(message);
    CHECK(message.find("safetensors file 'x.safetensors'") == 0);
    CHECK(message.find(expected) != std::string::npos);
  };

  SUBCASE("shorter than the length field") { check_refused({1, 2, 3}, "3 bytes long, too short"); }
  SUBCASE("header length beyond the sane maximum") {
    std::vector<uint8_t> bytes = valid;
    uint64_t huge = 200'000'000;
    std::memcpy(bytes.data(), &huge, 8);
    check_refused(bytes, "exceeds the 100000000-byte limit");
  }
  SUBCASE("header length beyond the end of the file") {
    std::vector<uint8_t> bytes(valid.begin(), valid.begin() + 20);
    check_refused(bytes, "runs past the end of the 20-byte file");
  }
  SUBCASE("data truncated") {
    std::vector<uint8_t> bytes(valid.begin(), valid.end() - 1);
    check_refused(bytes, "tensor 'b': data_offsets [8, 16) lie outside the data buffer of 15");
  }
  SUBCASE("trailing bytes after the last tensor") {
    std::vector<uint8_t> bytes = valid;
    bytes.push_back(0);
    check_refused(bytes, "cover 16 bytes of data but the file has 17");
  }
  SUBCASE("header is not JSON") {
    check_refused(file_image(R"({"a": {"dtype": "F32",)", data), "header is not valid JSON");
  }
  SUBCASE("header is not an object") {
    check_refused(file_image("[1, 2]", data), "must be a JSON object, got a array");
  }
  SUBCASE("unknown dtype") {
    check_refused(
        file_image(header(R"({"dtype":"F33","shape":[2],"data_offsets":[0,8]})", b_ok), data),
        "tensor 'a': unknown dtype \"F33\"");
  }
  SUBCASE("negative dimension") {
    check_refused(
        file_image(header(R"({"dtype":"F32","shape":[-2],"data_offsets":[0,8]})", b_ok), data),
        "tensor 'a': every shape dimension must be a non-negative integer, got -2");
  }
  SUBCASE("missing data_offsets") {
    check_refused(file_image(header(R"({"dtype":"F32","shape":[2]})", b_ok), data),
                  "tensor 'a': missing \"data_offsets\"");
  }
  SUBCASE("offsets that end before they begin") {
    check_refused(
        file_image(header(R"({"dtype":"F32","shape":[0],"data_offsets":[8,0]})", b_ok), data),
        "tensor 'a': data_offsets [8, 0) end before they begin");
  }
  SUBCASE("offsets out of bounds") {
    check_refused(
        file_image(header(a_ok, R"({"dtype":"I64","shape":[],"data_offsets":[16,24]})"), data),
        "tensor 'b': data_offsets [16, 24) lie outside the data buffer of 16 bytes");
  }
  SUBCASE("overlapping tensors") {
    check_refused(
        file_image(header(a_ok, R"({"dtype":"I64","shape":[],"data_offsets":[4,12]})"), data),
        "tensor 'b' at [4, 12) overlaps tensor 'a', which ends at 8");
  }
  SUBCASE("gap between tensors") {
    check_refused(
        file_image(header(R"({"dtype":"F32","shape":[1],"data_offsets":[0,4]})", b_ok), data),
        "gap in the data buffer: bytes [4, 8) before tensor 'b' belong to no tensor");
  }
  SUBCASE("region size does not match dtype and shape") {
    check_refused(
        file_image(header(R"({"dtype":"F64","shape":[2],"data_offsets":[0,8]})", b_ok), data),
        "tensor 'a': data_offsets [0, 8) hold 8 bytes, but dtype F64 with 2 elements "
        "needs 16");
  }
  SUBCASE("metadata value that is not a string") {
    check_refused(
        file_image(R"({"__metadata__":{"epoch":3},"a":)" + a_ok + R"(,"b":)" + b_ok + "}", data),
        "\"__metadata__\" value for \"epoch\" must be a string");
  }
  SUBCASE("tensor named twice") {
    check_refused(file_image(R"({"a":)" + a_ok + R"(,"a":)" + a_ok + "}", data),
                  "header names \"a\" twice");
  }
}

TEST_CASE("safetensors records are checked when added and looked up") {
  SafetensorsFile file;
  file.add_values<float>("w", {1, 2}, {2});
  CHECK(error_of([&] { file.add_values<float>("w", {1}, {1}); }).find("added twice") !=
        std::string::npos);
  CHECK(error_of([&] {
          file.add({"v", "F32", {3}, {0, 0, 0, 0}});
        }).find("4 bytes given, dtype and shape need 12") != std::string::npos);
  CHECK(error_of([&] {
          file.add({"v", "F4", {2}, {0}});
        }).find("unknown dtype") != std::string::npos);
  CHECK(error_of([&] {
          file.add({"v", "F32", {-1, -4}, {0, 0, 0, 0}});
        }).find("negative dimension -1") != std::string::npos);
  CHECK(error_of([&] { file.add_values<float>("__metadata__", {1}, {1}); }).find("reserved") !=
        std::string::npos);
  CHECK(error_of([&] { file.values<double>("w"); }).find("has dtype F32, not F64") !=
        std::string::npos);
  CHECK(error_of([&] { file.record("missing"); }).find("no tensor named 'missing'") !=
        std::string::npos);
  CHECK(file.records().size() == 1);
}

TEST_CASE("safetensors save replaces a file atomically") {
  TempDir dir("atomic");
  const std::string path = dir.path / "last.safetensors";
  SafetensorsFile old_file = fixture_content();
  old_file.save(path);

  SUBCASE("a successful save replaces the old file and leaves no temporary file") {
    SafetensorsFile new_file;
    new_file.add_values<float>("w", {1, 2, 3}, {3});
    new_file.save(path);
    check_same_records(SafetensorsFile::load(path), new_file);
    CHECK(dir.entries() == std::vector<std::string>{"last.safetensors"});
  }
  SUBCASE("a write that fails midway leaves the old file intact") {
    // A file-size limit below the new file's size makes write() fail with EFBIG (even for
    // root, unlike permissions); SIGXFSZ is ignored so the failure is an error, not a kill.
    SafetensorsFile big_file;
    big_file.add_values<float>("w", std::vector<float>(4096, 1.0f), {4096});
    rlimit saved_limit{};
    REQUIRE(getrlimit(RLIMIT_FSIZE, &saved_limit) == 0);
    auto saved_handler = signal(SIGXFSZ, SIG_IGN);
    rlimit small_limit = saved_limit;
    small_limit.rlim_cur = 4096;
    REQUIRE(setrlimit(RLIMIT_FSIZE, &small_limit) == 0);
    std::string message = error_of([&] { big_file.save(path); });
    setrlimit(RLIMIT_FSIZE, &saved_limit);
    signal(SIGXFSZ, saved_handler);

    CAPTURE(message);
    CHECK(message.find("cannot save '" + path + "'") == 0);
    CHECK(message.find("cannot write") != std::string::npos);
    CHECK(read_bytes(path) == kPythonFixture);
    CHECK(dir.entries() == std::vector<std::string>{"last.safetensors"});
  }
  SUBCASE("a missing directory is an error naming the path") {
    const std::string missing = dir.path / "no_such_dir" / "x.safetensors";
    std::string message = error_of([&] { old_file.save(missing); });
    CHECK(message.find("cannot save '" + missing + "'") == 0);
    CHECK(message.find("No such file or directory") != std::string::npos);
  }
  SUBCASE("loading a missing file or a directory is an error naming the path") {
    const std::string missing = dir.path / "missing.safetensors";
    CHECK(error_of([&] { SafetensorsFile::load(missing); }) ==
          "cannot load safetensors file '" + missing + "': No such file or directory");
    CHECK(error_of([&] { SafetensorsFile::load(dir.path); }) ==
          "cannot load safetensors file '" + dir.path.string() + "': not a regular file");
  }
}

}  // namespace bareyolo
