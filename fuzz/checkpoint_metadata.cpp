// fuzz/checkpoint_metadata.cpp — fuzz target: a checkpoint's metadata (models/train/checkpoint.h)
// and the configuration it saves (options_from_json, models/train/options.h). The input is the
// metadata map as `key NUL value NUL ...`, so that the fuzzer mutates the JSON values themselves
// rather than their escaped form inside the safetensors header (fuzz/safetensors.cpp has that).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

#include "models/train/checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace bareyolo;
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  SafetensorsFile file;
  while (!rest.empty()) {
    const size_t key_end = std::min(rest.find('\0'), rest.size());
    const std::string key(rest.substr(0, key_end));
    rest.remove_prefix(std::min(key_end + 1, rest.size()));
    const size_t value_end = std::min(rest.find('\0'), rest.size());
    file.metadata()[key] = std::string(rest.substr(0, value_end));
    rest.remove_prefix(std::min(value_end + 1, rest.size()));
  }
  try {
    const models::CheckpointInfo info = models::read_checkpoint_info(file, "fuzz.safetensors");
    models::TrainOptions options;
    models::options_from_json(info.config_json, options);
  } catch (const std::exception&) {  // a refusal, with its message: what bad input must get
  }
  return 0;
}
