// engine/distributed/launch/device_spec.cpp — parsing --device (grammar and invariant:
// device_spec.h).
#include "engine/distributed/launch/device_spec.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <set>
#include <stdexcept>

#include "engine/distributed/comm/nccl_communicator.h"

namespace bareyolo::dist {
namespace {

constexpr std::string_view kAccepted =
    "use 'cpu', 'auto', CUDA indices such as '0' or '0,1', or 'cuda:0'";

std::string lowercase_trimmed(std::string_view text) {
  size_t first = text.find_first_not_of(" \t");
  if (first == std::string_view::npos) return "";
  size_t last = text.find_last_not_of(" \t");
  std::string out(text.substr(first, last - first + 1));
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

[[noreturn]] void refuse(std::string_view text, std::string_view why) {
  throw std::runtime_error("--device '" + std::string(text) + "' " + std::string(why));
}

// One item of an index list: "3" or "cuda:3".
int parse_index(std::string_view whole, std::string item) {
  if (item.starts_with("cuda:")) item.erase(0, 5);
  int index = -1;
  const char* end = item.data() + item.size();
  auto [stop, error] = std::from_chars(item.data(), end, index);
  if (item.empty() || item[0] == '-' || error != std::errc() || stop != end)
    refuse(whole,
           "has '" + item + "' where a CUDA index (0, 1, ...) belongs: " + std::string(kAccepted));
  return index;
}

std::vector<int> parse_index_list(std::string_view whole, std::string_view list) {
  std::vector<int> indices;
  size_t start = 0;
  while (true) {
    size_t comma = list.find(',', start);
    std::string_view item =
        list.substr(start, comma == std::string_view::npos ? comma : comma - start);
    indices.push_back(parse_index(whole, lowercase_trimmed(item)));
    if (comma == std::string_view::npos) return indices;
    start = comma + 1;
  }
}

DeviceSpec cuda_spec(std::vector<int> indices, int gpu_count, std::string_view source) {
  for (int index : indices) {
    if (index < 0 || index >= gpu_count) {
      std::string present = gpu_count == 0
                                ? "there is no usable GPU"
                                : "the GPUs present are 0.." + std::to_string(gpu_count - 1);
      refuse(source, "asks for CUDA device " + std::to_string(index) + " but " + present +
                         " (see `bareyolo devices`): use an index in range or 'cpu'");
    }
  }
  DeviceSpec spec;
  spec.kind = DeviceKind::cuda;
  spec.ranks = static_cast<int>(indices.size());
  spec.cuda_indices = std::move(indices);
  return spec;
}

// The CUDA indices `name` (lowercased `text`) asks for: every GPU, device 0, or a list.
std::vector<int> requested_indices(std::string_view text, std::string_view name, int gpu_count) {
  if (name == "auto") {
    std::vector<int> all(static_cast<size_t>(gpu_count));
    for (int i = 0; i < gpu_count; ++i) all[static_cast<size_t>(i)] = i;
    return all;
  }
  if (name == "cuda") return {0};
  if (name.starts_with("cuda:")) name.remove_prefix(5);
  return parse_index_list(text, name);
}

std::string index_list_text(const std::vector<int>& indices) {
  std::string text;
  for (int index : indices) text += (text.empty() ? "" : ",") + std::to_string(index);
  return text;
}

}  // namespace

const char* to_string(Backend backend) {
  switch (backend) {
    case Backend::nccl:
      return "nccl";
    case Backend::shm:
      return "shm";
    default:
      return "tcp";
  }
}

DeviceSpec DeviceSpec::cpu(int ranks) {
  if (ranks < 1) {
    throw std::runtime_error("--nproc-per-node " + std::to_string(ranks) +
                             " must be at least 1 CPU rank");
  }
  DeviceSpec spec;
  spec.ranks = ranks;
  return spec;
}

DeviceSpec DeviceSpec::from_indices(const std::vector<int>& indices, int gpu_count) {
  if (indices.empty()) {
    throw std::runtime_error(
        "an empty list of CUDA devices was given: pass at least one index, or use the CPU");
  }
  return cuda_spec(indices, gpu_count, index_list_text(indices));
}

DeviceSpec DeviceSpec::from_index(int index, int gpu_count) {
  return from_indices({index}, gpu_count);
}

DeviceSpec DeviceSpec::parse(std::string_view text, int gpu_count, int nproc_per_node) {
  std::string name = lowercase_trimmed(text);
  if (name == "cpu" || (name == "auto" && gpu_count == 0)) return cpu(nproc_per_node);
  if (name == "mps")
    refuse(text, "is refused: Apple's MPS is not supported: use --device cpu or a CUDA index");
  if (name.empty()) refuse(text, "is empty: " + std::string(kAccepted));
  DeviceSpec spec = cuda_spec(requested_indices(text, name, gpu_count), gpu_count, text);
  if (nproc_per_node != 1 && nproc_per_node != spec.ranks) {
    refuse(text, "gives " + std::to_string(spec.ranks) + " CUDA rank(s) but --nproc-per-node is " +
                     std::to_string(nproc_per_node) +
                     ": with GPUs the device list sets the rank count (repeat an index, "
                     "e.g. '0,0', for two ranks on one GPU)");
  }
  return spec;
}

bool DeviceSpec::repeats_a_gpu() const {
  return std::set<int>(cuda_indices.begin(), cuda_indices.end()).size() < cuda_indices.size();
}

Backend DeviceSpec::default_backend() const {
  if (kind == DeviceKind::cuda && !repeats_a_gpu() && nccl_compiled()) return Backend::nccl;
  return Backend::tcp;
}

std::string DeviceSpec::describe() const {
  if (kind == DeviceKind::cuda) return "cuda:" + index_list_text(cuda_indices);
  return ranks == 1 ? "cpu" : "cpu x" + std::to_string(ranks);
}

}  // namespace bareyolo::dist
