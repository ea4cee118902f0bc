// data/image.h — an 8-bit RGB image in memory and its files: decode (stb_image, every image
// comes out as 3 channels, grayscale replicated), encode (JPEG/PNG by extension).
//
// Images stay 8-bit HWC RGB through augmentation, as OpenCV's are in YOLOv5 (the HSV LUTs and
// rounding are defined on bytes); only the finished batch is converted to float NCHW.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace bareyolo::data {

struct Image {
  int width = 0;
  int height = 0;
  std::vector<uint8_t> pixels;  // height rows of width RGB triples

  Image() = default;
  Image(int w, int h, uint8_t fill) : width(w), height(h), pixels(size_t(w) * h * 3, fill) {}
  uint8_t* row(int y) { return pixels.data() + size_t(y) * width * 3; }
  const uint8_t* row(int y) const { return pixels.data() + size_t(y) * width * 3; }
  uint8_t* at(int x, int y) { return row(y) + size_t(x) * 3; }
  const uint8_t* at(int x, int y) const { return row(y) + size_t(x) * 3; }
};

// Thrown for a file that cannot be read, decoded or written; what() names the file, and
// `reason` alone says why (stb's reason, or the system's).
struct ImageError : std::runtime_error {
  ImageError(const std::string& action, const std::string& path, const std::string& why)
      : std::runtime_error(action + " " + path + ": " + why), reason(why) {}
  std::string reason;
};

// The most pixels an image may have unless told otherwise (--max-pixels): PIL's
// Image.MAX_IMAGE_PIXELS. A 389 KB PNG can claim 20000x20000 pixels, 1.2 GB once decoded; the
// size is read from the header and refused before anything is allocated.
inline constexpr int64_t kDefaultMaxPixels = 178956970;

// Decodes a JPEG, PNG or BMP (and the other formats stb_image knows) into RGB. An image whose
// header claims more than `max_pixels` pixels (0: no limit) is refused before decoding.
Image read_image(const std::string& path, int64_t max_pixels = kDefaultMaxPixels);
// Decodes an image already in memory; `name` is used in error messages.
Image decode_image(const uint8_t* bytes, size_t size, const std::string& name,
                   int64_t max_pixels = kDefaultMaxPixels);
// Writes .jpg/.jpeg (quality 1..100) or .png, chosen by the extension.
void write_image(const std::string& path, const Image& image, int jpeg_quality = 95);

}  // namespace bareyolo::data
