// kernels/cuda/conv2d_none.cpp — the convolution path setting (cuda_ops.h) for a binary built
// without CUDA: there is no GPU convolution to steer, so the choice is only recorded (the
// selftest sets and restores it around checks that run on the CPU there); and no workspace.
#include <atomic>

#include "kernels/cuda/cuda_ops.h"

namespace bareyolo::cuda {

namespace {
std::atomic<ConvPath> chosen_path{ConvPath::cudnn};
}  // namespace

ConvPath conv_path() { return chosen_path; }
void set_conv_path(ConvPath path) { chosen_path = path; }
uint64_t convolution_workspace_moves(int) { return 0; }  // no GPU convolution, no workspace

}  // namespace bareyolo::cuda
