// kernels/cpu/convolution_choices.cpp — see kernels/convolution_choices.h: the process's table,
// plain C++ in every build (cudnn_conv.cpp reads and fills it on a GPU), and the identity from
// kernels/cuda/runtime, whose stand-ins answer without CUDA.
#include "kernels/convolution_choices.h"

#include <mutex>
#include <utility>

#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/runtime/versions.h"

namespace bareyolo::ops {

namespace {

struct DeviceTable {
  ConvolutionChoices choices;
  bool changed = false;  // since the last save
  std::string identity;  // a GPU's, asked of the runtime once (the Solver, load, save, broadcast)
};

std::mutex tables_mutex;
std::map<std::pair<DeviceKind, int>, DeviceTable> tables;

DeviceTable& table_of(const Device& device) { return tables[{device.kind, device.index}]; }

std::string gpu_identity(int gpu) {
  const cuda::DeviceProperties properties = cuda::device_properties(gpu);
  std::string identity = properties.name + ", sm_" + std::to_string(properties.compute_major) +
                         std::to_string(properties.compute_minor) + ", cuDNN ";
  for (const cuda::LibraryVersion& library : cuda::library_versions())
    if (library.name == "cuDNN") return identity + library.loaded.str();
  return identity + "unknown";
}

}  // namespace

std::string convolution_choices_identity(const Device& device) {
  if (!device.is_cuda()) return "";
  std::lock_guard<std::mutex> lock(tables_mutex);
  std::string& identity = table_of(device).identity;
  if (identity.empty()) identity = gpu_identity(device.index);
  return identity;
}

std::optional<ConvolutionChoice> find_convolution_choice(const Device& device,
                                                         const ConvolutionKey& key) {
  std::lock_guard<std::mutex> lock(tables_mutex);
  const ConvolutionChoices& choices = table_of(device).choices;
  const auto found = choices.find(key);
  if (found == choices.end()) return std::nullopt;
  return found->second;
}

ConvolutionChoices convolution_choices(const Device& device) {
  std::lock_guard<std::mutex> lock(tables_mutex);
  return table_of(device).choices;
}

void adopt_convolution_choices(const Device& device, const ConvolutionChoices& choices) {
  std::lock_guard<std::mutex> lock(tables_mutex);
  DeviceTable& table = table_of(device);
  for (const auto& [key, choice] : choices) {
    auto [at, added] = table.choices.try_emplace(key, choice);
    if (!added && at->second == choice) continue;
    at->second = choice;
    table.changed = true;
  }
}

bool convolution_choices_changed_since_saved(const Device& device) {
  std::lock_guard<std::mutex> lock(tables_mutex);
  return table_of(device).changed;
}

void mark_convolution_choices_saved(const Device& device) {
  std::lock_guard<std::mutex> lock(tables_mutex);
  table_of(device).changed = false;
}

uint64_t convolution_workspace_moves(const Device& device) {
  return device.is_cuda() ? cuda::convolution_workspace_moves(device.index) : 0;
}

void forget_convolution_choices() {
  std::lock_guard<std::mutex> lock(tables_mutex);
  tables.clear();
}

}  // namespace bareyolo::ops
