// models/train/autobatch.cpp — see autobatch.h.
#include "models/train/autobatch.h"

#include <algorithm>
#include <cstdio>

#include "data/dataset.h"
#include "data/multi_scale.h"
#include "kernels/device_memory.h"
#include "kernels/device_memory_stats.h"
#include "kernels/settings.h"  // defines: ops::use_settings
#include "models/train/run_model.h"
#include "models/train/step.h"
#include "models/yolo/model_config.h"

namespace bareyolo::models {

namespace {

std::string format(const char* pattern, double a, double b = 0, double c = 0) {
  char text[160];
  std::snprintf(text, sizeof text, pattern, a, b, c);
  return text;
}

}  // namespace

AutobatchResult autobatch_per_device(const DeviceMemory& memory, const MemoryProbe& probe) {
  constexpr double kFraction = 0.8;
  const std::vector<int> sizes = {1, 2, 4, 8, 16};
  const double free_gib = memory.total_gib - (memory.reserved_gib + memory.allocated_gib);
  std::vector<double> x, y;
  int first_failure = 0;
  for (int b : sizes) {
    const std::optional<double> used = probe(b);
    if (used) {
      x.push_back(b);
      y.push_back(*used);
    } else if (!first_failure) {
      first_failure = b;
    }
  }
  AutobatchResult result;
  if (x.size() < 2) {  // no line to fit: the one size that ran, if any, is known to fit
    if (!x.empty()) result.batch = int(x.front());
    result.message = "AutoBatch: " + std::string(x.empty() ? "no batch size" : "one batch size") +
                     " of 1, 2, 4, 8, 16 could be measured; using " + std::to_string(result.batch);
    return result;
  }
  // Least-squares line through the measured points.
  double mx = 0, my = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    mx += x[i] / double(x.size());
    my += y[i] / double(x.size());
  }
  double sxy = 0, sxx = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    sxy += (x[i] - mx) * (y[i] - my);
    sxx += (x[i] - mx) * (x[i] - mx);
  }
  const double p0 = sxy / sxx, p1 = my - p0 * mx;
  // (Clamped before the conversion: a tiny slope would overflow an int.)
  int b = p0 > 0 ? int(std::clamp((free_gib * kFraction - p1) / p0, -1.0, 1e6)) : 0;
  if (first_failure && b >= first_failure) {
    const auto at = std::find(sizes.begin(), sizes.end(), first_failure);
    b = at == sizes.begin() ? sizes.front() : *(at - 1);
  }
  if (b < 1 || b > 1024) {
    result.message = "AutoBatch: the memory measurements look wrong (predicted batch " +
                     std::to_string(b) + "); using 16";
    return result;
  }
  result.batch = b;
  result.message =
      format("AutoBatch: %.2f GiB free of %.2f GiB; ", free_gib, memory.total_gib) + "batch " +
      std::to_string(b) +
      format(" uses %.0f%% of the memory",
             100 * (p0 * b + p1 + memory.reserved_gib + memory.allocated_gib) / memory.total_gib);
  return result;
}

int probe_autobatch(const TrainOptions& options, int gpu,
                    const std::function<void(const std::string&)>& log) {
  const int nc = options.single_cls ? 1 : data::read_dataset_yaml(options.data).num_classes();
  const Device device = Device::cuda(gpu);
  DetectionModel model(run_model_config(options), {.nc = nc, .device = device});
  // Measured in the precision, layout and kernel settings the run trains in (bf16 activations
  // take half the memory, as YOLOv5 profiles under autocast; TF32 and --cudnn change which
  // algorithms run and the workspaces they take).
  ops::use_settings({.tf32 = options.tf32,
                     .winograd = options.winograd,
                     .cudnn_deterministic = options.cudnn_deterministic});
  const TrainOptions resolved = resolved_for(options, abilities_of(device));
  model.graph().set_mixed_precision(mixed_precision(resolved));
  model.graph().set_channels_last(channels_last(resolved));
  const int imgsz = std::max((options.imgsz + 31) / 32 * 32, 64);
  const LossOptions loss{scale_loss_gains(options.loss, model.num_levels(), nc, imgsz), nc};
  // --multi-scale trains batches up to about 1.5 imgsz: the probe measures the largest.
  const int gs = std::max(int(model.strides().back()), 32);
  const int largest = data::multi_scale_range(imgsz, gs).largest;
  const int side =
      options.multi_scale ? data::multi_scale_shape({imgsz, imgsz}, largest, gs).width : imgsz;
  const DeviceMemoryStats before = device_memory_stats(device);
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  const DeviceMemory memory{double(device_memory_total_bytes(device)) / kGiB,
                            double(before.reserved) / kGiB, double(before.allocated) / kGiB};
  const AutobatchResult result =
      autobatch_per_device(memory, [&](int batch) -> std::optional<double> {
        try {
          // Each size from an empty cache: the smaller sizes' activations and cached blocks
          // (reused only by requests of their own size class) would count toward this one's
          // peak, and the fitted slope would grow with them (YOLOv5 empties its cache too).
          model.graph().release_activations();
          release_cached_memory(device);
          reset_peak_memory_stats(device);
          for (int pass = 0; pass < 3; ++pass)
            forward_backward(model, Tensor::zeros({batch, 3, side, side}, device), {}, loss);
          wait_for_device(device);
          return double(device_memory_stats(device).peak_reserved) / 1e9;
        } catch (const OutOfDeviceMemory&) {  // this size does not fit
          release_cached_memory(device);
          return std::nullopt;
        }
      });
  log(result.message);
  return result.batch;
}

int global_autobatch(int per_device, int world, int nbs, std::string* message) {
  const int wanted = per_device * world;
  int batch = std::min(wanted, std::max(nbs, world));
  batch = std::max(batch / world * world, world);
  if (message) {
    *message = "AutoBatch: " + std::to_string(per_device) + " per device x " +
               std::to_string(world) + " rank(s) = " + std::to_string(wanted);
    if (wanted > nbs) *message += ", capped at nbs " + std::to_string(nbs);
    *message += " -> global batch " + std::to_string(batch) + " (" + std::to_string(batch / world) +
                " per rank)";
  }
  return batch;
}

}  // namespace bareyolo::models
