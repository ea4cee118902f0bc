// data/jpeg_decode.h — JPEG decoding through libjpeg-turbo's TurboJPEG API, optionally reduced
// in the DCT domain.
//
// Why TurboJPEG: its SIMD IDCT and colour conversion decode several times faster than
// stb_image (coco128's train JPEGs: docs/data.md). And it can decode at 1/2, 1/4 or 1/8 of the
// size: the reduced IDCT keeps only the lowest frequencies of each 8x8 block, so a photograph
// far larger than the training size costs a fraction of a full decode, and each output pixel
// is close to the mean of the block it stands for, where a bilinear resize by 4 or more would
// sample a few pixels of it and alias.
//
// Its pixels differ from stb_image's by rounding only: both use libjpeg's accurate integer
// IDCT and its triangle-filter ("fancy") chroma upsampling, with their own fixed-point
// arithmetic for these and for the YCbCr -> RGB conversion.
//
// Nothing here throws for a bad file: each call says in `error` why TurboJPEG gave up, and
// data/image.cpp decides what becomes of that JPEG.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "data/image.h"

namespace bareyolo::data {

// True when `bytes` start as every JPEG does: the start-of-image marker FF D8, then the FF
// of the next marker. The file's name plays no part.
bool has_jpeg_signature(const uint8_t* bytes, size_t size);

struct JpegHeader {
  int width = 0, height = 0;
  // False for CMYK and YCCK (Adobe) JPEGs, which TurboJPEG does not convert to RGB.
  bool converts_to_rgb = false;
  std::string error;  // TurboJPEG's reason when the header could not be read cleanly, else ""
};
// Reads the size and colour space from the header, without decoding (or allocating) pixels.
JpegHeader read_jpeg_header(const uint8_t* bytes, size_t size);

struct JpegPixels {
  Image image;
  // TurboJPEG's reason when it could not decode every pixel cleanly, else "". A warning counts:
  // libjpeg's warnings are about damaged data (a file cut short, a corrupt entropy-coded
  // segment) that it papers over with grey.
  std::string error;
};
// Decodes the JPEG whose header is `header` to 8-bit RGB (grayscale replicated). With
// `min_long_side` > 0 it is decoded at the smallest of TurboJPEG's reductions 1/2, 1/4 and 1/8
// whose long side (TurboJPEG's scaled size: the side times the factor, rounded up) is still at
// least `min_long_side`; at 1/1 when none is.
JpegPixels decode_jpeg(const uint8_t* bytes, size_t size, const JpegHeader& header,
                       int min_long_side = 0);

}  // namespace bareyolo::data
