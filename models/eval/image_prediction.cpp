// models/eval/image_prediction.cpp — see image_prediction.h.
#include "models/eval/image_prediction.h"

#include "data/letterbox.h"
#include "models/eval/validate.h"

namespace bareyolo::models {

LetterboxedImage letterboxed_image(const std::string& path, int canvas, int64_t max_pixels) {
  const data::LoadedImage loaded = data::load_resized(path, canvas, max_pixels);
  data::LetterboxPlacement placement;
  data::Image image = data::letterbox(loaded.image, canvas, canvas, true, placement);
  return {.image = std::move(image),
          .letterbox = {.gain = float(placement.ratio * loaded.image.width / loaded.original_width),
                        .pad_x = float(placement.pad_x),
                        .pad_y = float(placement.pad_y),
                        .original_width = float(loaded.original_width),
                        .original_height = float(loaded.original_height)}};
}

Tensor network_input(const data::Image& letterboxed, Device device) {
  const int width = letterboxed.width, height = letterboxed.height;
  std::vector<float> chw(size_t(3) * width * height);
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x)
      for (int c = 0; c < 3; ++c)
        chw[(size_t(c) * height + y) * width + x] = letterboxed.at(x, y)[c] / 255.0f;
  return Tensor::from_vector(chw, {1, 3, height, width}).on(device);
}

LetterboxedInput letterboxed_input(const std::string& path, int canvas, int64_t max_pixels,
                                   Device device) {
  const LetterboxedImage letterboxed = letterboxed_image(path, canvas, max_pixels);
  return {.batch = network_input(letterboxed.image, device), .letterbox = letterboxed.letterbox};
}

std::vector<Detection> detections_in_image(const std::vector<Tensor>& head, DetectionModel& model,
                                           const Letterbox& letterbox, const NmsOptions& nms) {
  std::vector<Detection> detections = std::move(detect(head, model, nms).front());
  for (Detection& d : detections) d.box = scale_box_to_original(d.box, letterbox);
  return detections;
}

}  // namespace bareyolo::models
