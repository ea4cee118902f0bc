// fuzz/config_yaml.cpp — fuzz target: a --config yaml's text, read as a flat yaml
// (models/train/flat_yaml.h); the CLI then hands each value to its flag's own validator.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "models/train/flat_yaml.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    for (const auto& entry : bareyolo::models::parse_flat_yaml(text, "fuzz.yaml", "--config"))
      (void)entry.value.Scalar();
  } catch (const std::exception&) {  // a refusal, with its message: what bad input must get
  }
  return 0;
}
