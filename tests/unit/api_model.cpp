// tests/unit/api_model.cpp — bareyolo::Model (models/api/model.h) built from a PyTorch YOLOv5
// checkpoint, as `bareyolo predict --weights X.pt` is: the network from the yaml the .pt
// carries (no yaml file), its parameters the state_dict PyTorch loads from it (the reference
// tests/fixtures/torch/*.state.safetensors, written by PyTorch), and saved weights that rebuild
// the same model on their own.
#include "models/api/model.h"

#include <filesystem>

#include "engine/safetensors.h"
#include "engine/shipped_files.h"
#include "tests/support/data_fixtures.h"

using namespace bareyolo;

namespace {

std::string fixture(const std::string& name) {
  return shipped_file("tests/fixtures/torch/" + name);
}

// Every parameter and buffer of `model` is the reference's value (floats widened exactly from
// their fp16), and the reference has no entry the model lacks.
void check_state_is_reference(Model& model, const std::string& reference_name) {
  const SafetensorsFile reference = SafetensorsFile::load(fixture(reference_name));
  const std::vector<StateEntry> state = model.network().state();
  CHECK(state.size() == reference.records().size());
  for (const StateEntry& entry : state) {
    INFO(reference_name << " " << entry.name);
    REQUIRE(reference.contains(entry.name));
    const bool counter = reference.record(entry.name).dtype == "I64";  // num_batches_tracked
    const Tensor want = counter ? reference.tensor(entry.name) : reference.float_tensor(entry.name);
    CHECK(entry.value->to_doubles() == want.to_doubles());
  }
}

}  // namespace

TEST_CASE("bareyolo::Model reads a YOLOv5 .pt: PyTorch's state_dict values, no yaml file") {
  Model stripped(fixture("best.pt"));  // stripped by train.py: its 'model'
  CHECK(stripped.network().num_classes() == 80);
  REQUIRE(stripped.names().size() == 80);
  CHECK(stripped.names()[0] == "person");
  CHECK(stripped.cfg().empty());
  check_state_is_reference(stripped, "best.state.safetensors");

  Model training(fixture("epoch0.pt"));  // written during training: its 'ema', as YOLOv5 takes
  check_state_is_reference(training, "epoch0.state.safetensors");

  // Saved, the weights carry the model yaml: they rebuild the same model, which predicts the
  // same detections (a low threshold, so that this barely trained model finds some).
  testing::TempDir dir;
  const std::string saved = (dir.path() / "best.safetensors").string();
  stripped.save(saved);
  Model again(saved);
  CHECK(again.names() == stripped.names());
  const std::string photo = shipped_file("tests/fixtures/photos/rocket.jpg");
  const PredictOptions low{.imgsz = 64, .conf = 1e-6f};
  const std::vector<models::Detection> want = stripped.predict(photo, low);
  const std::vector<models::Detection> got = again.predict(photo, low);
  REQUIRE(!want.empty());
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    CHECK(got[i].class_id == want[i].class_id);
    CHECK(got[i].conf == want[i].conf);
    CHECK(got[i].box.x1 == want[i].box.x1);
    CHECK(got[i].box.y2 == want[i].box.y2);
  }
}

TEST_CASE("bareyolo::Model refuses weights that do not say which model they hold") {
  testing::TempDir dir;
  const std::string bare = (dir.path() / "bare.safetensors").string();
  SafetensorsFile file;
  file.add_values<float>("model.0.conv.weight", {1.0f}, {1});
  file.save(bare);
  CHECK_THROWS_WITH_AS(
      Model{bare},
      (bare + " does not say which model it holds (no 'yaml' or 'cfg' metadata): build "
              "the Model from the model yaml instead")
          .c_str(),
      std::invalid_argument);
}
