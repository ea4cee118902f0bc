// kernels/settings.h — the kernels' process-wide switches: they change how some ops compute (in
// which order, on which units), never what. Set once, before a run's first op (the Solver does,
// from its options: models/train/solver.h).
#pragma once

namespace bareyolo::ops {

struct KernelSettings {
  // TF32 tensor-core math for GPU float convolutions and GEMMs (about 1e-3 relative error per
  // product instead of float's 1e-7): cuda/runtime/runtime.h.
  bool tf32 = false;
  // Winograd F(2x2, 3x3) for the CPU's 3x3 stride-1 convolutions where its measured rule picks
  // it (fewer multiplications, other last bits); false: im2col + GEMM: cpu/winograd.h.
  bool winograd = true;
};

void use_settings(const KernelSettings& settings);

}  // namespace bareyolo::ops
