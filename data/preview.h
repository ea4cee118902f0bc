// data/preview.h — a batch as one picture (`bareyolo show-batch`): its images in a grid, each
// box outlined in its class's colour with the class name above it, to see what the model is
// fed. Text uses stb_easy_font (a tiny built-in vector font), drawn as filled rectangles.
#pragma once

#include <string>
#include <vector>

#include "data/batch.h"
#include "data/image.h"

namespace bareyolo::data {

Image render_batch(const Batch& batch, const std::vector<std::string>& names);

}  // namespace bareyolo::data
