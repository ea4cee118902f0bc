// data/image.cpp — image files <-> Image: JPEGs through TurboJPEG (data/jpeg_decode.h), the
// rest through stb_image; writing through stb_image_write.
#include "data/image.h"

#include <stb/stb_image.h>
#include <stb/stb_image_write.h>

#include <algorithm>
#include <cctype>
#include <memory>

#include "data/jpeg_decode.h"
#include "data/regular_file.h"

namespace bareyolo::data {

namespace {

std::string lower_extension(const std::string& path) {
  size_t dot = path.find_last_of('.');
  std::string ext = dot == std::string::npos ? "" : path.substr(dot + 1);
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return ext;
}

// Why stb_image could not decode `name`: for the extensions YOLOv5 lists as images that stb
// does not read at all, say so and which formats it does read, instead of "unknown image
// type".
std::string decode_failure(const std::string& name) {
  const std::string ext = lower_extension(name);
  for (const char* unread : {"tif", "tiff", "webp", "dng", "pfm"})
    if (ext == unread)
      return "." + ext +
             " files are listed as images (as YOLOv5 lists them), but bareyolo's decoder reads "
             "only JPEG, PNG, BMP, GIF, TGA, PSD, HDR, PIC and PNM (PPM/PGM): convert them, "
             "e.g. to PNG";
  return stbi_failure_reason();
}

// Refuses, before anything is allocated, an image whose header claims more than `max_pixels`
// pixels (0: no limit).
void check_pixel_limit(int width, int height, int64_t max_pixels, const std::string& name) {
  const int64_t pixels = int64_t(width) * height;
  if (max_pixels > 0 && pixels > max_pixels)
    throw ImageError("cannot decode image", name,
                     std::to_string(width) + "x" + std::to_string(height) + " is " +
                         std::to_string(pixels) + " pixels, more than the limit " +
                         std::to_string(max_pixels) +
                         " (--max-pixels, a guard against decompression bombs); raise "
                         "--max-pixels if the image is genuine");
}

// Decodes with stb_image at full size. `turbojpeg_error`: why TurboJPEG gave up on this JPEG,
// the reason to give if stb fails too ("" for the other formats: stb's own reason).
ReducedImage decode_with_stb(const uint8_t* bytes, size_t size, const std::string& name,
                             int64_t max_pixels, const std::string& turbojpeg_error) {
  int width = 0, height = 0, channels_in_file = 0;
  // The header's size first: a file whose header stb cannot read fails in the decode below.
  if (stbi_info_from_memory(bytes, static_cast<int>(size), &width, &height, &channels_in_file))
    check_pixel_limit(width, height, max_pixels, name);
  // desired_channels = 3: grayscale is replicated to RGB, alpha is dropped.
  unsigned char* decoded =
      stbi_load_from_memory(bytes, static_cast<int>(size), &width, &height, &channels_in_file, 3);
  if (decoded == nullptr)
    throw ImageError("cannot decode image", name,
                     turbojpeg_error.empty() ? decode_failure(name) : turbojpeg_error);
  std::unique_ptr<unsigned char, void (*)(void*)> owner(decoded, stbi_image_free);
  Image image;
  image.width = width;
  image.height = height;
  image.pixels.assign(decoded, decoded + size_t(width) * height * 3);
  return {.image = std::move(image), .file_width = width, .file_height = height};
}

// TurboJPEG when it decodes the file cleanly, else stb (see read_image in image.h).
ReducedImage decode_jpeg_with_fallback(const uint8_t* bytes, size_t size, const std::string& name,
                                       int64_t max_pixels, int min_long_side) {
  const JpegHeader header = read_jpeg_header(bytes, size);
  if (!header.error.empty()) return decode_with_stb(bytes, size, name, max_pixels, header.error);
  check_pixel_limit(header.width, header.height, max_pixels, name);
  if (!header.converts_to_rgb) return decode_with_stb(bytes, size, name, max_pixels, "");
  JpegPixels decoded = decode_jpeg(bytes, size, header, min_long_side);
  if (!decoded.error.empty()) return decode_with_stb(bytes, size, name, max_pixels, decoded.error);
  return {
      .image = std::move(decoded.image), .file_width = header.width, .file_height = header.height};
}

ReducedImage decode_reduced(const uint8_t* bytes, size_t size, const std::string& name,
                            int64_t max_pixels, int min_long_side) {
  if (size == 0) throw ImageError("cannot decode image", name, "the file is empty");
  if (has_jpeg_signature(bytes, size))
    return decode_jpeg_with_fallback(bytes, size, name, max_pixels, min_long_side);
  return decode_with_stb(bytes, size, name, max_pixels, "");
}

}  // namespace

Image read_image(const std::string& path, int64_t max_pixels) {
  return read_image_reduced(path, 0, max_pixels).image;
}

Image decode_image(const uint8_t* bytes, size_t size, const std::string& name, int64_t max_pixels) {
  return decode_reduced(bytes, size, name, max_pixels, 0).image;
}

ReducedImage read_image_reduced(const std::string& path, int min_long_side, int64_t max_pixels) {
  const FileContents contents = read_regular_file(path);
  if (contents.kind != FileContents::regular)
    throw ImageError("cannot open image", path, contents.error);
  return decode_reduced(reinterpret_cast<const uint8_t*>(contents.bytes.data()),
                        contents.bytes.size(), path, max_pixels, min_long_side);
}

void write_image(const std::string& path, const Image& image, int jpeg_quality) {
  std::string ext = lower_extension(path);
  int ok = 0;
  if (ext == "jpg" || ext == "jpeg")
    ok = stbi_write_jpg(path.c_str(), image.width, image.height, 3, image.pixels.data(),
                        jpeg_quality);
  else if (ext == "png")
    ok = stbi_write_png(path.c_str(), image.width, image.height, 3, image.pixels.data(),
                        image.width * 3);
  else
    throw ImageError("cannot write", path, "use a .jpg or .png file name");
  if (!ok) throw ImageError("cannot write image", path, "is the folder writable?");
}

}  // namespace bareyolo::data
