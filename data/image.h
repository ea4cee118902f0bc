// data/image.h — an 8-bit RGB image in memory and its files: decode (JPEG through TurboJPEG,
// data/jpeg_decode.h; the other formats, and the JPEGs TurboJPEG cannot decode, through
// stb_image; every image comes out as 3 channels, grayscale replicated), encode (JPEG/PNG by
// extension).
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
// `reason` alone says why (TurboJPEG's or stb's reason, or the system's).
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
// A file is taken for a JPEG by its first bytes (data/jpeg_decode.h), whatever its name; a JPEG
// that TurboJPEG cannot decode cleanly (CMYK, a header or data it refuses) goes to stb_image,
// which decoded every image before TurboJPEG did, and whose verdict stands: when it fails too,
// the error gives TurboJPEG's reason. So a JPEG cut short is refused, as PIL refuses it in
// YOLOv5's check of the dataset.
Image read_image(const std::string& path, int64_t max_pixels = kDefaultMaxPixels);
// Decodes an image already in memory; `name` is used in error messages.
Image decode_image(const uint8_t* bytes, size_t size, const std::string& name,
                   int64_t max_pixels = kDefaultMaxPixels);

// An image as decoded, and its size in the file: they differ for a JPEG decoded reduced.
struct ReducedImage {
  Image image;
  int file_width = 0, file_height = 0;
};
// As read_image, but a JPEG at least twice `min_long_side` on its long side is decoded reduced
// in the DCT domain: at the smallest of 1/2, 1/4, 1/8 whose long side is still at least
// `min_long_side` (data/jpeg_decode.h). Other images come at their full size.
ReducedImage read_image_reduced(const std::string& path, int min_long_side,
                                int64_t max_pixels = kDefaultMaxPixels);
// Writes .jpg/.jpeg (quality 1..100) or .png, chosen by the extension.
void write_image(const std::string& path, const Image& image, int jpeg_quality = 95);

}  // namespace bareyolo::data
