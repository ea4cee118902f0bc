// fuzz/dataset_yaml.cpp — fuzz target: a dataset yaml's text (data/dataset_yaml.h).
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "data/dataset_yaml.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    bareyolo::data::parse_dataset_yaml(text, "fuzz/dataset.yaml");
  } catch (const std::exception&) {  // a refusal, with its message: what bad input must get
  }
  return 0;
}
