// tools/bareyolo/model_commands.cpp — `init`, `grads` and `convert` (see model_commands.h); the
// work is in models/ (weights.h, gradient_report.h), this file reads the command line and the
// files.
#include "tools/bareyolo/model_commands.h"

#include <cstdio>
#include <map>
#include <string>

#include "data/float_pixels.h"  // defines: check_float_pixels
#include "engine/safetensors.h"
#include "models/loss/gradient_report.h"
#include "models/yolo/weights.h"
#include "tools/bareyolo/device_option.h"
#include "tools/bareyolo/output_paths.h"
#include "tools/bareyolo/validators.h"

namespace bareyolo {

namespace {

struct ModelCommandOptions {
  std::string cfg, weights, batch, out, hyp, dtype;  // dtype empty: each tensor keeps its own
  int nc = 0;
  uint64_t seed = 0;
  bool amp = false;
  DeviceOption device;
} options;

int init_weights() {
  cli::require_outputs_spare_inputs({{options.out, "the --out file"}},
                                    {{options.cfg, "the --cfg model yaml"}},
                                    "give --out a new file name");
  models::DetectionModel model(models::load_model_config(options.cfg),
                               {.nc = options.nc, .seed = options.seed});
  SafetensorsFile file;
  models::add_state(file, model.state());
  file.metadata()["format"] = "bareyolo";
  file.metadata()["nc"] = std::to_string(model.num_classes());
  file.save(options.out);
  std::printf("wrote %s: %s, nc=%d, %lld parameters\n", options.out.c_str(), options.cfg.c_str(),
              model.num_classes(), static_cast<long long>(model.parameter_count()));
  return 0;
}

int compute_grads() {
  cli::require_outputs_spare_inputs({{options.out, "the --out file"}},
                                    {{options.weights, "the --weights file"},
                                     {options.batch, "the --batch file"},
                                     {options.cfg, "the --cfg model yaml"},
                                     {options.hyp, "the --hyp yaml"}},
                                    "give --out a new file name");
  const SafetensorsFile weights = models::load_weights_file(options.weights);
  const int nc = options.nc != 0 ? options.nc : models::metadata_nc(weights, options.weights);
  models::DetectionModel model(models::weights_model_config(weights, options.weights, options.cfg),
                               {.nc = nc, .device = options.device.resolve()});
  models::load_state(weights, model.state(), options.weights);
  model.graph().set_mixed_precision(options.amp);
  const SafetensorsFile batch = SafetensorsFile::load(options.batch);
  const models::LossHyp hyp =
      options.hyp.empty() ? models::LossHyp{} : models::load_loss_hyp(options.hyp);
  const Tensor images = batch.tensor("images");
  data::check_float_pixels(images, options.batch + ": 'images'");
  const std::vector<models::LabelRow> targets = models::label_rows(
      batch, "targets", options.batch, int(images.shape().n), model.num_classes());
  SafetensorsFile report = models::gradient_report(model, images.on(model.device()), targets, hyp);
  // The weights and images are finite: a non-finite loss or gradient is an overflow in the
  // step, and a report of it would pass for a result.
  for (const TensorRecord& record : report.records())
    require_finite(record, "grads of " + options.weights + " on " + options.batch,
                   "the step overflowed on finite weights and images (nothing was written)");
  report.save(options.out);
  const std::vector<float> loss = report.values<float>("loss");
  std::printf("wrote %s: loss box %.6f obj %.6f cls %.6f total %.6f\n", options.out.c_str(),
              loss[0], loss[1], loss[2], report.values<float>("loss_total")[0]);
  return 0;
}

int convert_weights() {
  // In place, a conversion would replace the original (and bf16's rounding cannot be undone).
  cli::require_outputs_spare_inputs({{options.out, "the --out file"}},
                                    {{options.weights, "the --weights file"}},
                                    "give --out a new file name");
  // A PyTorch checkpoint's tensors come as stored (F16 stays F16) with its yaml, nc, names.
  const SafetensorsFile file = models::load_weights_file(options.weights);
  for (const TensorRecord& record : file.records())
    models::require_finite_weights(record, options.weights);
  const SafetensorsFile converted =
      options.dtype.empty()
          ? file
          : models::with_float_dtype(file, options.dtype == "bf16" ? DType::bf16 : DType::f32);
  converted.save(options.out);
  // What was written, dtype by dtype (the counters and anchors keep theirs).
  std::map<std::string, int> written;
  for (const TensorRecord& record : converted.records()) ++written[record.dtype];
  std::string dtypes;
  for (const auto& [dtype, count] : written)
    dtypes += (dtypes.empty() ? "" : ", ") + std::to_string(count) + " " + dtype;
  std::printf("wrote %s: %zu tensors, floating ones %s (%s; %zu bytes)\n", options.out.c_str(),
              converted.records().size(),
              options.dtype.empty() ? "as stored" : ("as " + options.dtype).c_str(), dtypes.c_str(),
              converted.serialize().size());
  return 0;
}

}  // namespace
void add_model_commands(CLI::App& app) {
  CLI::App* init = app.add_subcommand("init", "Write freshly initialised weights (safetensors)");
  init->add_option("--cfg", options.cfg, "Model yaml")->required();
  init->add_option("--nc", options.nc, "Number of classes (default: the yaml's)")
      ->check(cli::kNonNegative);
  init->add_option("--seed", options.seed, "Initialisation seed")->check(cli::kNonNegative);
  init->add_option("--out", options.out, "Output .safetensors")->required();

  CLI::App* grads = app.add_subcommand(
      "grads",
      "One training forward, YOLOv5's loss and backward on a batch; write the loss, "
      "head outputs and parameter gradients");
  grads->add_option("--cfg", options.cfg, "Model yaml (default: the one the weights carry)");
  grads->add_option("--weights", options.weights, "Weights (.safetensors or YOLOv5 .pt)")
      ->required()
      ->check(CLI::ExistingFile);
  grads
      ->add_option("--batch", options.batch,
                   "Batch (.safetensors): images [b,3,H,W] in 0..1, targets [n,6]")
      ->required()
      ->check(CLI::ExistingFile);
  grads->add_option("--out", options.out, "Output .safetensors")->required();
  grads->add_option("--nc", options.nc, "Number of classes (default: the weights' metadata)")
      ->check(cli::kNonNegative);
  grads->add_option("--hyp", options.hyp, "Hyperparameter yaml (default: hyp.scratch-low)")
      ->check(CLI::ExistingFile);
  grads->add_flag("--amp", options.amp,
                  "bf16 mixed precision, as train --amp runs it (docs/mixed_precision.md)");
  options.device.add_to(grads);

  CLI::App* convert = app.add_subcommand(
      "convert",
      "Write a weights file (.safetensors) from weights, a checkpoint or a YOLOv5 .pt, its "
      "floating tensors as stored, or in bf16 (half the bytes) or fp32");
  convert
      ->add_option("--weights", options.weights,
                   "Weights or checkpoint (.safetensors, or a PyTorch YOLOv5 .pt)")
      ->required()
      ->check(CLI::ExistingFile);
  convert
      ->add_option("--dtype", options.dtype,
                   "bf16 (rounded to nearest) or fp32 (exact); F32, BF16 and F16 tensors "
                   "are converted (default: each keeps its dtype)")
      ->check(CLI::IsMember({"bf16", "fp32"}));
  convert->add_option("--out", options.out, "Output .safetensors")->required();
}

std::optional<int> run_model_command(const CLI::App& app) {
  if (app.got_subcommand("init")) return init_weights();
  if (app.got_subcommand("grads")) return compute_grads();
  if (app.got_subcommand("convert")) return convert_weights();
  return std::nullopt;
}

}  // namespace bareyolo
