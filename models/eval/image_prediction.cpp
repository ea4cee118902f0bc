// models/eval/image_prediction.cpp — see image_prediction.h.
#include "models/eval/image_prediction.h"

#include "data/letterbox.h"
#include "models/eval/validate.h"

namespace bareyolo::models {

LetterboxedInput letterboxed_input(const std::string& path, int canvas, int64_t max_pixels,
                                   Device device) {
  const data::LoadedImage loaded = data::load_resized(path, canvas, max_pixels);
  data::LetterboxPlacement placement;
  const data::Image input = data::letterbox(loaded.image, canvas, canvas, true, placement);
  std::vector<float> chw(size_t(3) * canvas * canvas);
  for (int y = 0; y < canvas; ++y)
    for (int x = 0; x < canvas; ++x)
      for (int c = 0; c < 3; ++c)
        chw[(size_t(c) * canvas + y) * canvas + x] = input.at(x, y)[c] / 255.0f;
  return {.batch = Tensor::from_vector(chw, {1, 3, canvas, canvas}).on(device),
          .letterbox = {.gain = float(placement.ratio * loaded.image.width / loaded.original_width),
                        .pad_x = float(placement.pad_x),
                        .pad_y = float(placement.pad_y),
                        .original_width = float(loaded.original_width),
                        .original_height = float(loaded.original_height)}};
}

std::vector<Detection> detections_in_image(const std::vector<Tensor>& head, DetectionModel& model,
                                           const Letterbox& letterbox, const NmsOptions& nms) {
  std::vector<Detection> detections = std::move(detect(head, model, nms).front());
  for (Detection& d : detections) d.box = scale_box_to_original(d.box, letterbox);
  return detections;
}

}  // namespace bareyolo::models
