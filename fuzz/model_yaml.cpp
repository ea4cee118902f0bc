// fuzz/model_yaml.cpp — fuzz target: a model yaml's text (models/yolo/model_config.h), and what
// the graph builder reads of each row (its inputs and arguments).
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "models/yolo/model_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace bareyolo::models;
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const ModelConfig config = parse_model_config(text, "fuzz.yaml");
    for (const ModelRow& row : config.rows) {
      for (int from : row.from) input_row(config, row, from);
      for (size_t k = 0; k < row.args.size(); ++k)
        row.args[k].kind == ModelArg::Kind::boolean ? bool_arg(config, row, k, false)
                                                    : int_arg(config, row, k, 0);
    }
  } catch (const std::exception&) {  // a refusal, with its message: what bad input must get
  }
  return 0;
}
