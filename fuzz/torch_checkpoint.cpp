// fuzz/torch_checkpoint.cpp — fuzz target: a PyTorch checkpoint's bytes (a zip holding a pickle),
// read as `--weights X.pt` reads it (engine/torch_zip.h, engine/torch_pickle.h,
// models/yolo/torch_checkpoint.h): the zip, the restricted unpickler, the state_dict walk and
// the yaml text, then the yaml parsed as a model config.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "engine/torch_zip.h"
#include "models/yolo/torch_checkpoint.h"
#include "models/yolo/weights.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace bareyolo;
  try {
    const TorchZip zip = TorchZip::parse(std::vector<uint8_t>(data, data + size), "fuzz.pt");
    const SafetensorsFile weights = models::torch_checkpoint_weights(zip);
    models::metadata_names(weights);
    models::weights_model_config(weights, "fuzz.pt", "");
  } catch (const std::exception&) {  // a refusal, with its message: what bad input must get
  }
  return 0;
}
