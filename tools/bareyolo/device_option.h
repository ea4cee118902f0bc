// tools/bareyolo/device_option.h — --device and --tf32 for the commands that run in one process
// (val, predict, grads): one device, "cpu", "0" or "cuda:1", and TF32 math on a GPU or not.
#pragma once

#include <CLI/CLI.hpp>

#include <stdexcept>
#include <string>

#include "engine/distributed/launch/device_spec.h"
#include "kernels/devices.h"
#include "kernels/settings.h"
#include "kernels/view.h"

namespace bareyolo {

struct DeviceOption {
  std::string device = "cpu";
  std::string tf32 = "off";

  void add_to(CLI::App* command) {
    command->add_option("--device", device, "cpu, 0 or cuda:0: where the model runs")
        ->capture_default_str();
    command
        ->add_option("--tf32", tf32,
                     "on: TF32 tensor-core math for float convolutions and GEMMs on a GPU")
        ->check(CLI::IsMember({"on", "off"}))
        ->capture_default_str();
  }

  // The device, once TF32 is set as asked; throws naming --device when it is not one device.
  Device resolve() const {
    const dist::DeviceSpec spec = dist::DeviceSpec::parse(device, usable_gpu_count());
    if (spec.ranks != 1)
      throw std::invalid_argument("--device " + device +
                                  ": this command runs on one device; give one (cpu, 0, cuda:1)");
    if (spec.kind == dist::DeviceKind::cpu) return Device::cpu();
    ops::use_settings({.tf32 = tf32 == "on"});
    return Device::cuda(spec.cuda_indices.front());
  }
};

}  // namespace bareyolo
