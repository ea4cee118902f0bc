// data/letterbox.cpp — load_resized and letterbox (see letterbox.h).
#include "data/letterbox.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "data/perspective.h"
#include "data/stage_clock.h"
#include "data/warp.h"

namespace bareyolo::data {

namespace {

// Python's round(): half to even (nearbyint in the default rounding mode).
int round_half_even(double x) { return static_cast<int>(std::nearbyint(x)); }

}  // namespace

ImageSize resized_size(int width, int height, int imgsz) {
  const double r = double(imgsz) / std::max(width, height);
  if (r == 1) return {width, height};
  return {static_cast<int>(std::ceil(width * r)), static_cast<int>(std::ceil(height * r))};
}

LoadedImage load_resized(const std::string& path, int imgsz, int64_t max_pixels) {
  // A large JPEG comes decoded reduced, its long side still >= imgsz; the size it is resized
  // to is the file's, so a reduced decode and a full one give images of one size.
  ReducedImage read = [&] {
    const StageTimer timer(Stage::decode);
    return read_image_reduced(path, imgsz, max_pixels);
  }();
  LoadedImage loaded;
  loaded.image = std::move(read.image);
  loaded.original_width = read.file_width;
  loaded.original_height = read.file_height;
  const ImageSize size = resized_size(read.file_width, read.file_height, imgsz);
  if (size.width != loaded.image.width || size.height != loaded.image.height) {
    const StageTimer timer(Stage::resize);
    loaded.image = resize_bilinear(loaded.image, size.width, size.height);
  }
  return loaded;
}

Image letterbox(const Image& image, int width, int height, bool scale_up,
                LetterboxPlacement& placement) {
  double r = std::min(double(height) / image.height, double(width) / image.width);
  if (!scale_up) r = std::min(r, 1.0);
  int new_width = round_half_even(image.width * r), new_height = round_half_even(image.height * r);
  double dw = (width - new_width) / 2.0, dh = (height - new_height) / 2.0;
  placement = {r, dw, dh};
  int left = round_half_even(dw - 0.1), top = round_half_even(dh - 0.1);
  Image resized = (new_width == image.width && new_height == image.height)
                      ? image
                      : resize_bilinear(image, new_width, new_height);
  Image out(width, height, kPadValue);
  for (int y = 0; y < new_height; ++y)
    std::memcpy(out.at(left, top + y), resized.row(y), size_t(new_width) * 3);
  return out;
}

}  // namespace bareyolo::data
