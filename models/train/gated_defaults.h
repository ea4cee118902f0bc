// models/train/gated_defaults.h — the defaults that wait for a GPU run.
//
// Three of the trainer's defaults are meant for GPUs but turn on only once a run of the device
// script (tools/gpu_check.sh) has shown on a GPU that what they turn on is right: its summary
// ends with one gate per default, "ready" when every step the gate names passed. Each default is
// one switch below, turned on by hand with that run's figures (and docs/gpu.md's words). The
// options' resolution (models/train/options.h: resolved_for, records_cuda_graphs) reads them;
// the tests hand it opened gates, so what turning one on does is tested before it is turned on.
#pragma once

namespace bareyolo::models {

struct GatedDefaults {
  // Gate "--amp: the default on sm80+ (#46)": neither --amp nor --no-amp trains in bf16 mixed
  // precision on a GPU with bf16 tensor cores (compute capability 8.0 or newer), float32
  // elsewhere. Shut: float32 everywhere.
  bool amp_on_bf16_gpus = false;
  // Gate "--channels-last auto: on for GPUs (#46)": --channels-last auto is channels last on a
  // GPU, NCHW on the CPU. Shut: NCHW everywhere.
  bool channels_last_on_gpus = false;
  // Gate "--cuda-graph auto: NCCL steps too (#48)": --cuda-graph auto records a step with NCCL
  // collectives too. Shut: such a step is recorded under --cuda-graph on only.
  bool cuda_graph_with_nccl = false;
};

// What this build does.
inline constexpr GatedDefaults kGatedDefaults{};

}  // namespace bareyolo::models
