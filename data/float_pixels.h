// data/float_pixels.h — images that enter as floats instead of through the decoder (the batch
// file of `bareyolo grads`). The decoder's bytes / 255 are finite and in [0, 1] by
// construction; floats from a file are checked to be the same, since a NaN pixel flows
// through the forward, the loss and every gradient without an error (a NaN loss, exit 0).
#pragma once

#include <string>

#include "engine/tensor.h"

namespace bareyolo::data {

// Throws std::invalid_argument naming `source`, the first value that is not finite or lies
// outside [0, 1], its position (image, channel, y, x), and what images must hold.
void check_float_pixels(const Tensor& images, const std::string& source);

}  // namespace bareyolo::data
