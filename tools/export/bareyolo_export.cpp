// tools/export/bareyolo_export.cpp — bareyolo-export, the program behind `bareyolo export`: the
// same flags (tools/bareyolo/export_options.h), and the one binary that links libonnx and
// libprotobuf (shared libraries in Debian), so that `bareyolo` itself does not.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>
#include <string>

#include "engine/safetensors.h"             // defines: SafetensorsFile
#include "models/export/onnx_export.h"      // defines: export_onnx
#include "models/yolo/weights.h"            // defines: load_state, metadata_names
#include "tools/bareyolo/export_options.h"  // defines: ExportOptions, add_export_options

namespace {

std::string dims_text(const std::vector<int64_t>& dims) {
  std::string text;
  for (int64_t d : dims) text += (text.empty() ? "" : ", ") + (d < 0 ? "batch" : std::to_string(d));
  return "[" + text + "]";
}

int run(const bareyolo::cli::ExportOptions& options) {
  using namespace bareyolo;
  const SafetensorsFile weights = models::load_weights_file(options.weights);
  const models::ModelConfig config =
      models::weights_model_config(weights, options.weights, options.cfg);
  // The class count the weights were made for (init and train record it); else the yaml's.
  const int nc =
      weights.metadata().count("nc") ? int(weights.metadata_integer("nc", options.weights)) : 0;
  models::DetectionModel model(config, {.nc = nc});
  models::load_state(weights, model.state(), options.weights);
  std::string note;
  const int imgsz =
      models::stride_multiple_size(options.imgsz, int(model.strides().back()), 0, &note);
  if (!note.empty()) std::printf("warning: %s\n", note.c_str());
  const models::OnnxExportSummary summary =
      models::export_onnx(config, model,
                          {.imgsz = imgsz,
                           .opset = options.opset,
                           .dynamic_batch = options.dynamic,
                           .names = models::metadata_names(weights)},
                          options.out);
  std::printf("exported %s with %s to %s: ONNX opset %d, %lld nodes, %.1f MB\n",
              options.cfg.empty() ? "its own yaml" : options.cfg.c_str(), options.weights.c_str(),
              options.out.c_str(), options.opset, static_cast<long long>(summary.nodes),
              double(summary.bytes) / 1e6);
  std::printf("  input  images  %s, RGB 0..1\n", dims_text(summary.input_dims).c_str());
  std::printf("  output output0 %s: cx, cy, w, h (pixels), objectness, %d class scores\n",
              dims_text(summary.output_dims).c_str(), model.num_classes());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bareyolo-export: a bareyolo model as an ONNX graph (run as `bareyolo export`)"};
  bareyolo::cli::ExportOptions options;
  bareyolo::cli::add_export_options(app, options);
  CLI11_PARSE(app, argc, argv);
  try {
    return run(options);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "bareyolo export: error: %s\n", error.what());
    return 1;
  }
}
