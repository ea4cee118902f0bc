// fuzz/label_file.cpp — fuzz target: a YOLO label file's text (data/label_file.h).
#include <cstddef>
#include <cstdint>
#include <string>

#include "data/label_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const bareyolo::data::LabelFile labels = bareyolo::data::parse_labels(text, "fuzz.txt", 80);
  for (const bareyolo::data::Problem& problem : labels.problems) (void)problem.to_string();
  return 0;
}
