// fuzz/safetensors.cpp — fuzz target: a safetensors file image, its header and its data
// (engine/safetensors.h): parsed, then every record read as the loaders read it.
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>

#include "engine/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using bareyolo::SafetensorsFile;
  try {
    const SafetensorsFile file = SafetensorsFile::parse(std::span(data, size), "fuzz.safetensors");
    for (const bareyolo::TensorRecord& record : file.records()) {
      bareyolo::non_finite_values(record);
      try {
        file.tensor(record.name);
        file.float_tensor(record.name);
      } catch (const std::exception&) {  // a dtype or rank the engine does not take
      }
    }
    file.metadata_integer("nc", "fuzz.safetensors");
  } catch (const std::exception&) {  // a refusal, with its message: what bad input must get
  }
  return 0;
}
