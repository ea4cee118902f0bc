// engine/optim/clip.h — gradient-norm clipping over the optimised gradients of an arena
// (PyTorch's clip_grad_norm_): one sum of squares over the range, then one pass that scales
// every gradient by max_norm / (norm + 1e-6) when that is below 1. The sum stays where the
// gradients are and the factor is computed there: on a GPU, no host round trip in the step.
#pragma once

#include "engine/parameter_arena.h"

namespace bareyolo {

void clip_gradient_norm(ParameterArena& arena, double max_norm);

// The L2 norm of the optimised gradients, read back to the host (tests, logs).
double gradient_norm(ParameterArena& arena);

}  // namespace bareyolo
