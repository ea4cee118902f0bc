// tests/unit/torch_checkpoint.cpp — PyTorch YOLOv5 checkpoints read without Python
// (engine/torch_zip.h, engine/torch_pickle.h, models/yolo/torch_checkpoint.h), on the files
// YOLOv5 v7.0's own train.py wrote (tests/fixtures/torch, made by
// tools/make_torch_checkpoint_fixture.py): the state equals the state_dict PyTorch loads, byte
// for byte, and hostile pickles are refused naming what they asked for, with nothing run.
#include "models/yolo/torch_checkpoint.h"

#include <filesystem>
#include <fstream>

#include "engine/shipped_files.h"
#include "engine/torch_pickle.h"
#include "models/yolo/weights.h"
#include "tests/support/testing.h"

using namespace bareyolo;
using namespace bareyolo::models;

namespace {
std::string fixture(const std::string& name) {
  return shipped_file("tests/fixtures/torch/" + name);
}

std::vector<uint8_t> file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)),
                              std::istreambuf_iterator<char>());
}

// `checkpoint` read here against the state_dict PyTorch loaded from it (`reference`).
void check_against_reference(const std::string& checkpoint, const std::string& reference) {
  const SafetensorsFile read = load_weights_file(fixture(checkpoint));
  const SafetensorsFile torch = SafetensorsFile::load(fixture(reference));
  REQUIRE(read.records().size() == torch.records().size());
  for (const TensorRecord& want : torch.records()) {
    INFO(checkpoint << " " << want.name);
    REQUIRE(read.contains(want.name));
    const TensorRecord& got = read.record(want.name);
    CHECK(got.dtype == want.dtype);
    CHECK(got.shape == want.shape);
    CHECK(got.bytes == want.bytes);
  }
  for (const char* key : {"nc", "names", "stride"})
    CHECK(read.metadata().at(key) == torch.metadata().at(key));
}
}  // namespace

TEST_CASE("YOLOv5 v7.0 checkpoints read as exactly the state_dict PyTorch loads") {
  // best.pt: stripped (the model, fp16); epoch0.pt: unstripped (its EMA, beside the model,
  // optimizer state, numpy fitness); best_torch2.pt: best.pt in torch 2.x's layout.
  check_against_reference("best.pt", "best.state.safetensors");
  check_against_reference("epoch0.pt", "epoch0.state.safetensors");
  check_against_reference("best_torch2.pt", "best.state.safetensors");
  const SafetensorsFile best = load_weights_file(fixture("best.pt"));
  // state_dict's order: a module's parameters, its buffers, then its children's.
  std::vector<std::string> first;
  for (size_t i = 0; i < 6; ++i) first.push_back(best.records()[i].name);
  CHECK(first == std::vector<std::string>{"model.0.conv.weight", "model.0.bn.weight",
                                          "model.0.bn.bias", "model.0.bn.running_mean",
                                          "model.0.bn.running_var",
                                          "model.0.bn.num_batches_tracked"});
  CHECK(best.records().back().name == "model.24.m.2.bias");
  CHECK(best.record("model.0.conv.weight").dtype == "F16");
  CHECK(best.record("model.0.bn.num_batches_tracked").dtype == "I64");
  CHECK(best.metadata().at("stride") == "8,16,32");
  CHECK(best.metadata().at("names").substr(0, 14) == "person\nbicycle");
}

TEST_CASE("a YOLOv5 checkpoint builds its own model and loads into it without a yaml file") {
  const std::string path = fixture("best.pt");
  const SafetensorsFile weights = load_weights_file(path);
  DetectionModel model(weights_model_config(weights, path, ""), {.nc = metadata_nc(weights, path)});
  CHECK(model.num_classes() == 80);
  load_state(weights, model.state(), path);
  // Every entry came from the checkpoint, widened exactly from its F16.
  const std::vector<StateEntry> state = model.state();
  CHECK(state.front().value->to_vector<float>() ==
        weights.float_tensor(state.front().name).to_vector<float>());
  // Without --cfg and without a yaml in the file, the message says what to give.
  SafetensorsFile bare;
  CHECK_THROWS_WITH_AS(weights_model_config(bare, "w.safetensors", ""),
                       doctest::Contains("give the model yaml with --cfg"), std::invalid_argument);
}

TEST_CASE("hostile or damaged checkpoints are refused naming what is wrong, running nothing") {
  const std::filesystem::path marker = "/tmp/bareyolo-pwned";
  std::filesystem::remove(marker);
  struct Case {
    const char* name;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"hostile/os_system.pt", "refused global 'posix.system'"},
      {"hostile/eval.pt", "refused global 'builtins.eval'"},
      {"hostile/unknown_global.pt", "refused global '__main__.UnknownClass'"},
      {"hostile/truncated.pt", "the pickle ends early"},
      {"hostile/short_storage.pt", "where the pickle says"},
      {"hostile/segmentation.pt", "segmentation checkpoint"},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    CHECK_THROWS_WITH_AS(load_weights_file(fixture(c.name)), doctest::Contains(c.message),
                         std::invalid_argument);
  }
  CHECK(!std::filesystem::exists(marker));
}

TEST_CASE("the zip reader refuses a changed byte, a cut file and a compressed entry") {
  const std::vector<uint8_t> good = file_bytes(fixture("best.pt"));
  CHECK_NOTHROW(TorchZip::parse(good, "best.pt"));
  std::vector<uint8_t> changed = good;
  changed[good.size() / 2] ^= 0x40;  // inside a storage: its CRC-32 no longer matches
  CHECK_THROWS_WITH_AS(TorchZip::parse(changed, "changed.pt"),
                       doctest::Contains("fails its CRC-32 check"), std::invalid_argument);
  const std::vector<uint8_t> cut(good.begin(), good.begin() + good.size() / 2);
  CHECK_THROWS_WITH_AS(TorchZip::parse(cut, "cut.pt"),
                       doctest::Contains("no zip end-of-central-directory record"),
                       std::invalid_argument);
  // The first entry's method field (central directory) set to deflate.
  std::vector<uint8_t> compressed = good;
  const uint8_t central[4] = {0x50, 0x4b, 0x01, 0x02};
  auto at = std::search(compressed.begin(), compressed.end(), central, central + 4);
  REQUIRE(at != compressed.end());
  at[10] = 8;
  CHECK_THROWS_WITH_AS(TorchZip::parse(compressed, "deflated.pt"),
                       doctest::Contains("is compressed (method 8)"), std::invalid_argument);
  CHECK(TorchZip::looks_like_zip(good));
  CHECK_FALSE(TorchZip::looks_like_zip(file_bytes(fixture("best.state.safetensors"))));
}
