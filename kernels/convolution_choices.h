// kernels/convolution_choices.h — which cuDNN algorithm each convolution shape runs, as the
// process knows it: chosen by timing at a shape's first call (kernels/cuda/cudnn_conv.cpp),
// read from and written to the per-user cache file (engine/algorithm_cache.h), and taken from
// rank 0 by every rank of a job (dist::broadcast_convolution_choices).
//
// Part of the dispatch layer (device_memory.h says why it exists): code above kernels/ reads
// and sets the choices here, by Device. A build without CUDA keeps the table too (no
// convolution fills it there), so the cache file's format and the broadcast are tested on
// any machine.
#pragma once

#include <compare>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "kernels/view.h"

namespace bareyolo::ops {

enum class ConvolutionPass { forward, backward_data, backward_weight };
// The operands' math: float on plain FMAs, float with TF32 tensor cores, bf16 tensor cores.
enum class ConvolutionOperands { float32, tf32, bf16 };

// What a choice depends on, within one GPU model and cuDNN version (the table's identity):
// the pass, the shapes and strides cuDNN's descriptors carry, the pointers' common alignment
// (an algorithm may refuse less aligned data), the math, the memory layout and whether only
// deterministic algorithms may run.
struct ConvolutionKey {
  ConvolutionPass pass = ConvolutionPass::forward;
  int64_t images = 0, in_channels = 0, height = 0, width = 0;  // x, the input (or its gradient)
  int64_t x_batch_stride = 0;  // a channel slice of a Concat buffer strides past c*h*w
  int64_t y_batch_stride = 0;  // the output's (or its gradient's)
  int64_t out_channels = 0;    // the weight's
  int64_t kernel_h = 0, kernel_w = 0;
  int64_t stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0;
  int64_t alignment = 256;  // bytes, up to 256
  ConvolutionOperands operands = ConvolutionOperands::float32;
  bool channels_last = false;
  bool deterministic = true;  // --cudnn deterministic

  auto operator<=>(const ConvolutionKey&) const = default;
};

// The algorithm a key runs, as cuDNN numbers it, with the math type its descriptor carries,
// the workspace it takes and how long it took when it was timed (0: not timed, the only
// candidate). A provisional choice was made without knowing that it is the fastest: the
// candidates could not be timed (no scratch output fitted in memory, or a CUDA graph was being
// recorded), or one it could have been was beyond memory's reach (its workspace over a cap that
// free memory set, or not to be had). The process and its job's ranks run it, but it is never
// saved to the cache file: a later run chooses again.
struct ConvolutionChoice {
  int algorithm = 0;  // a cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t
  int math = 0;       // a cudnnMathType_t
  int64_t workspace = 0;
  double milliseconds = 0;
  bool provisional = false;

  bool operator==(const ConvolutionChoice&) const = default;
};

using ConvolutionChoices = std::map<ConvolutionKey, ConvolutionChoice>;

// Who may read a device's choices: "<GPU name>, sm_<major><minor>, cuDNN <loaded version>"
// (another GPU or another cuDNN chooses afresh). "" for the CPU, which has no choices.
std::string convolution_choices_identity(const Device& device);

// The process's table for `device` (thread-safe). find: the key's choice if one was made or
// adopted; all: a copy of the table; adopt: `choices` replace this device's for their keys (the
// others stay: a convolution adopts each choice it makes); changed_since_saved: a choice was
// made or adopted since the last mark_saved (or since the process started).
std::optional<ConvolutionChoice> find_convolution_choice(const Device& device,
                                                         const ConvolutionKey& key);
ConvolutionChoices convolution_choices(const Device& device);
void adopt_convolution_choices(const Device& device, const ConvolutionChoices& choices);
bool convolution_choices_changed_since_saved(const Device& device);
void mark_convolution_choices_saved(const Device& device);
// How many times `device`'s shared convolution workspace has moved (grown) in this process (0 on
// the CPU): a CUDA graph recorded before a move reads the old address (the Solver records again).
uint64_t convolution_workspace_moves(const Device& device);

// Empties every device's table (tests).
void forget_convolution_choices();

}  // namespace bareyolo::ops
