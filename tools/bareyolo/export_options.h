// tools/bareyolo/export_options.h — the flags of `bareyolo export`, declared once for the two
// programs that read them: `bareyolo export` checks them and hands them on to `bareyolo-export`
// (tools/export/), the separate binary that links the ONNX and protobuf libraries, so that the
// trainer binary itself never depends on them.
//
//   bareyolo export --format onnx --cfg CFG --weights W --out model.onnx [--imgsz 640]
//                   [--opset 12] [--dynamic]
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace bareyolo::cli {

struct ExportOptions {
  std::string format = "onnx", cfg, weights, out;
  int imgsz = 640, opset = 12;  // 12: YOLOv5's, and the newest OpenCV 4.6 reads
  bool dynamic = false;
};

inline void add_export_options(CLI::App& command, ExportOptions& options) {
  command.add_option("--format", options.format, "Output format (onnx)")
      ->check(CLI::IsMember({"onnx"}));
  command.add_option("--cfg", options.cfg, "Model yaml (default: the one the weights carry)");
  command.add_option("--weights", options.weights, "Weights (.safetensors or YOLOv5 .pt)")
      ->required()
      ->check(CLI::ExistingFile);
  command
      .add_option("--imgsz", options.imgsz,
                  "Input side in pixels (rounded up to the model's largest stride)")
      ->check(CLI::Range(32, 8192));
  command.add_option("--opset", options.opset, "ONNX opset (12..17; default 12)")
      ->check(CLI::Range(12, 17));
  command.add_flag("--dynamic", options.dynamic, "A dynamic batch dimension (default: batch 1)");
  command.add_option("--out", options.out, "Output file (model.onnx)")->required();
}

// The command line that gives `options` back to add_export_options' parser.
inline std::vector<std::string> export_arguments(const ExportOptions& options) {
  std::vector<std::string> arguments = {"--format",  options.format,
                                        "--weights", options.weights,
                                        "--imgsz",   std::to_string(options.imgsz),
                                        "--opset",   std::to_string(options.opset),
                                        "--out",     options.out};
  if (options.dynamic) arguments.push_back("--dynamic");
  if (!options.cfg.empty()) arguments.insert(arguments.end(), {"--cfg", options.cfg});
  return arguments;
}

}  // namespace bareyolo::cli
