// engine/distributed/launch/device_spec.h — what `--device` asks for: which devices, how many
// ranks, and which communication backend fits them.
//
// Accepted strings (spaces around items are ignored, names are case-insensitive):
//   "cpu"               CPU ranks; how many is a separate count (--nproc-per-node, default 1)
//   "0", "0,1,3"        CUDA devices by index, one rank per index
//   "cuda", "cuda:0"    the same with PyTorch's prefix ("cuda" is device 0);
//   "cuda:0,1"          the prefix once for the list, or on every item ("cuda:0,cuda:1")
//   "0,0"               a repeated index: two ranks sharing one GPU (TCP backend)
//   "auto"              every visible GPU, or the CPU when there is none
// Refused with a sentence naming the string: "mps" (Apple's GPUs), "gpu", "cuda:x", "-1",
// "0,,1", "" and indices beyond the GPUs present.
//
// Invariant: `cuda_indices` holds one entry per rank (cuda_indices[local_rank] is the GPU of
// that rank); for the CPU it is empty and `ranks` alone counts the processes.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "engine/distributed/launch/env.h"

namespace bareyolo::dist {

enum class DeviceKind { cpu, cuda };
enum class Backend { tcp, nccl, shm };
const char* to_string(Backend backend);

struct DeviceSpec {
  DeviceKind kind = DeviceKind::cpu;
  std::vector<int> cuda_indices;  // one per rank; empty for the CPU
  int ranks = 1;

  // Parses a --device string. `gpu_count` is the number of usable GPUs
  // (bareyolo::usable_gpu_count() in the program; injected by tests); `nproc_per_node` is
  // the rank count for "cpu" (and for "auto" without GPUs) and must be 1 or match the number
  // of indices for CUDA devices. Throws std::runtime_error naming the string.
  static DeviceSpec parse(std::string_view text, int gpu_count, int nproc_per_node = 1);
  // The C++ API's forms: a list of CUDA indices (one rank each) and a single index.
  static DeviceSpec from_indices(const std::vector<int>& indices, int gpu_count);
  static DeviceSpec from_index(int index, int gpu_count);
  static DeviceSpec cpu(int ranks = 1);

  // True when some GPU carries more than one rank ("0,0").
  bool repeats_a_gpu() const;
  // NCCL for distinct GPUs when this binary has NCCL (BAREYOLO_WITH_CUDA); the TCP ring for
  // the CPU, a repeated GPU, or a build without CUDA.
  Backend default_backend() const;
  // More than one rank asked for and no launcher owns the processes: the caller forks them.
  bool wants_spawn(const LaunchEnv& env) const { return ranks > 1 && !env.launched(); }
  // "cpu", "cpu x4", "cuda:0", "cuda:0,1" — for logs and messages.
  std::string describe() const;
};

}  // namespace bareyolo::dist
