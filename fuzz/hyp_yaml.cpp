// fuzz/hyp_yaml.cpp — fuzz target: a --hyp yaml's text, read as a flat yaml and each value
// checked against its hyperparameter's range (models/train/options.h).
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "models/train/options.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  bareyolo::models::TrainOptions options;
  try {
    bareyolo::models::parse_hyp_yaml(text, "fuzz.yaml", options);
  } catch (const std::exception&) {  // a refusal, with its message: what bad input must get
  }
  return 0;
}
