// data/preview.cpp — drawing a batch as a grid (see preview.h).
#include "data/preview.h"

#include <math.h>  // stb_easy_font uses ceil() unqualified

#include <algorithm>
#include <cmath>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include <stb/stb_easy_font.h>
#pragma GCC diagnostic pop

#include "data/hsv.h"

namespace bareyolo::data {

namespace {

void fill_rect(Image& image, int x1, int y1, int x2, int y2, Rgb colour) {
  x1 = std::max(x1, 0), y1 = std::max(y1, 0);
  x2 = std::min(x2, image.width), y2 = std::min(y2, image.height);
  for (int y = y1; y < y2; ++y)
    for (int x = x1; x < x2; ++x) std::copy(colour.begin(), colour.end(), image.at(x, y));
}

void outline(Image& image, int x1, int y1, int x2, int y2, int thickness, Rgb colour) {
  fill_rect(image, x1, y1, x2, y1 + thickness, colour);
  fill_rect(image, x1, y2 - thickness, x2, y2, colour);
  fill_rect(image, x1, y1, x1 + thickness, y2, colour);
  fill_rect(image, x2 - thickness, y1, x2, y2, colour);
}

// Draws `text` (printable ASCII; anything else shows as '?') with its top-left at (x, y) on
// a filled label background.
void draw_label(Image& image, int x, int y, std::string text, Rgb background) {
  for (char& c : text)
    if (c < 32 || c > 126) c = '?';
  int width = stb_easy_font_width(text.data()) + 2, height = 10;
  fill_rect(image, x, y, x + width, y + height, background);
  std::vector<float> quads(text.size() * 160 + 64);  // stb: about 270 bytes per character
  int count = stb_easy_font_print(float(x + 1), float(y + 1), text.data(), nullptr, quads.data(),
                                  int(quads.size() * sizeof(float)));
  for (int q = 0; q < count; ++q) {
    const float* v = quads.data() + q * 16;  // 4 vertices of (x, y, z, rgba)
    fill_rect(image, int(v[0]), int(v[1]), int(v[8]), int(v[9]), Rgb{255, 255, 255});
  }
}

Rgb class_colour(int cls) {
  return hsv_to_rgb({uint8_t((cls * 47) % 180), 220, 230});  // well-spread hues
}

}  // namespace

Image render_batch(const Batch& batch, const std::vector<std::string>& names) {
  int columns = int(std::ceil(std::sqrt(double(batch.size))));
  int rows = (batch.size + columns - 1) / std::max(columns, 1);
  Image grid(columns * batch.width, rows * batch.height, 0);
  const size_t plane = size_t(batch.width) * batch.height;
  for (int i = 0; i < batch.size; ++i) {
    int ox = (i % columns) * batch.width, oy = (i / columns) * batch.height;
    const float* chw = batch.image(i);
    for (int y = 0; y < batch.height; ++y)
      for (int x = 0; x < batch.width; ++x) {
        size_t at = size_t(y) * batch.width + x;
        uint8_t* p = grid.at(ox + x, oy + y);
        for (int c = 0; c < 3; ++c) p[c] = uint8_t(std::lround(chw[c * plane + at] * 255.0f));
      }
    outline(grid, ox, oy, ox + batch.width, oy + batch.height, 1, Rgb{255, 255, 255});
  }
  for (int64_t t = 0; t < batch.num_targets(); ++t) {
    const LabelRow label = batch.label(t);
    const int cls = label.class_id;
    int ox = (label.image % columns) * batch.width, oy = (label.image / columns) * batch.height;
    int x1 = ox + int((label.cx - label.w / 2) * batch.width);
    int x2 = ox + int((label.cx + label.w / 2) * batch.width);
    int y1 = oy + int((label.cy - label.h / 2) * batch.height);
    int y2 = oy + int((label.cy + label.h / 2) * batch.height);
    draw_box(grid, x1, y1, x2, y2, cls,
             cls < int(names.size()) ? names[size_t(cls)] : std::to_string(cls), oy);
  }
  return grid;
}

void draw_box(Image& image, int x1, int y1, int x2, int y2, int cls, const std::string& text,
              int label_top) {
  const Rgb colour = class_colour(cls);
  outline(image, x1, y1, x2, y2, 2, colour);
  draw_label(image, x1, std::max(label_top, y1 - 10), text, colour);
}

}  // namespace bareyolo::data
