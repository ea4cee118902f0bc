// data/letterbox.h — fitting an image to the network's input: YOLOv5's load_image (long side
// to imgsz) and letterbox (scale to fit a canvas, pad with grey 114).
#pragma once

#include <string>

#include "data/image.h"

namespace bareyolo::data {

// An image read from disk and resized so its long side is `imgsz` (sides ceil(w0 * r),
// ceil(h0 * r) with r = imgsz / max(w0, h0)); `original_*` is the size in the file. A JPEG at
// least twice imgsz is decoded reduced in the DCT domain first (read_image_reduced), then
// resized bilinearly from there.
struct LoadedImage {
  Image image;
  int original_width = 0, original_height = 0;
};
// `max_pixels` as read_image takes it.
LoadedImage load_resized(const std::string& path, int imgsz,
                         int64_t max_pixels = kDefaultMaxPixels);
// The size load_resized gives an image of width x height (the cache lays its files out by it).
struct ImageSize {
  int width = 0, height = 0;
  bool operator==(const ImageSize&) const = default;
};
ImageSize resized_size(int width, int height, int imgsz);

// Where letterbox put the image: scaled by `ratio`, offset by the float half-padding
// (pad_x, pad_y). Labels follow these floats; the pixels sit at the rounded top/left
// (YOLOv5 keeps this half-pixel mismatch; so do we).
struct LetterboxPlacement {
  double ratio = 1;
  double pad_x = 0, pad_y = 0;
};

// Fits `image` into width x height keeping its aspect ratio; never enlarges when !scale_up.
Image letterbox(const Image& image, int width, int height, bool scale_up,
                LetterboxPlacement& placement);

}  // namespace bareyolo::data
