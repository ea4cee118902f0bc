// models/eval/image_prediction.h — one image through a detector as `bareyolo predict` and
// bareyolo::Model::predict run it: read it, resize and letterbox it onto the square canvas
// (data/letterbox.h), scale to 0..1 RGB; then, after the caller's forward in eval mode, decode
// and NMS, and map the boxes back onto the original image's pixels.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/image.h"
#include "engine/tensor.h"
#include "models/eval/boxes.h"
#include "models/eval/nms.h"
#include "models/yolo/yolo_model.h"

namespace bareyolo::models {

// An image read and letterboxed onto the square canvas, and where the original sits on it.
struct LetterboxedImage {
  data::Image image;
  Letterbox letterbox;
};

// Throws data::ImageError when `path` cannot be read (naming it and why).
LetterboxedImage letterboxed_image(const std::string& path, int canvas, int64_t max_pixels);

// The network's input for a letterboxed image: [1, 3, H, W], RGB in 0..1, on `device`.
Tensor network_input(const data::Image& letterboxed, Device device);

// An image as the network's input: `batch` = network_input of letterboxed_image.
struct LetterboxedInput {
  Tensor batch;
  Letterbox letterbox;
};
LetterboxedInput letterboxed_input(const std::string& path, int canvas, int64_t max_pixels,
                                   Device device);

// The detections of `head` (model.forward's output on one letterboxed image), after NMS, with
// their boxes in the original image's pixels.
std::vector<Detection> detections_in_image(const std::vector<Tensor>& head, DetectionModel& model,
                                           const Letterbox& letterbox, const NmsOptions& nms);

}  // namespace bareyolo::models
