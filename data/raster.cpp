// data/raster.cpp — see raster.h.
#include "data/raster.h"

#include <math.h>  // stb_easy_font uses ceil() unqualified

#include <algorithm>
#include <cmath>
#include <vector>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include <stb/stb_easy_font.h>
#pragma GCC diagnostic pop

namespace bareyolo::data {

namespace {

constexpr int kGlyphHeight = 10;  // stb_easy_font's line: 7 rows of glyph and descenders

std::string printable(std::string text) {
  for (char& c : text)
    if (c < 32 || c > 126) c = '?';
  return text;
}

}  // namespace

void fill_rect(Image& image, int x1, int y1, int x2, int y2, Rgb colour) {
  x1 = std::max(x1, 0), y1 = std::max(y1, 0);
  x2 = std::min(x2, image.width), y2 = std::min(y2, image.height);
  for (int y = y1; y < y2; ++y)
    for (int x = x1; x < x2; ++x) std::copy(colour.begin(), colour.end(), image.at(x, y));
}

void outline_rect(Image& image, int x1, int y1, int x2, int y2, int thickness, Rgb colour) {
  fill_rect(image, x1, y1, x2, y1 + thickness, colour);
  fill_rect(image, x1, y2 - thickness, x2, y2, colour);
  fill_rect(image, x1, y1, x1 + thickness, y2, colour);
  fill_rect(image, x2 - thickness, y1, x2, y2, colour);
}

void draw_line(Image& image, double x0, double y0, double x1, double y1, int thickness,
               Rgb colour) {
  if (!std::isfinite(x0) || !std::isfinite(y0) || !std::isfinite(x1) || !std::isfinite(y1)) return;
  // One pen dab per pixel step along the longer axis; the dab is thickness x thickness.
  const double steps = std::ceil(std::max(std::abs(x1 - x0), std::abs(y1 - y0)));
  const int lead = (thickness - 1) / 2;
  for (double s = 0; s <= steps; ++s) {
    const double t = steps > 0 ? s / steps : 0;
    const int x = int(std::lround(x0 + t * (x1 - x0))) - lead;
    const int y = int(std::lround(y0 + t * (y1 - y0))) - lead;
    fill_rect(image, x, y, x + thickness, y + thickness, colour);
  }
}

void polygon_spans(const Polygon& polygon, int width, int height,
                   const std::function<void(int y, int x1, int x2)>& span) {
  const size_t n = polygon.size();
  if (n < 3) return;
  // The first pixel index whose centre is at or right of (below) `edge`, within [0, size].
  const auto first_centre_from = [](double edge, int size) {
    return int(std::clamp(std::ceil(edge - 0.5), 0.0, double(size)));
  };
  const auto [low, high] = std::minmax_element(polygon.begin(), polygon.end(),
                                               [](Point a, Point b) { return a.y < b.y; });
  std::vector<double> crossings;
  for (int y = first_centre_from(low->y, height); y < first_centre_from(high->y, height); ++y) {
    const double centre = y + 0.5;
    crossings.clear();
    for (size_t i = 0; i < n; ++i) {
      const Point& a = polygon[i];
      const Point& b = polygon[(i + 1) % n];
      // Half-open in y, so a vertex on the centre line counts once and a flat edge never.
      if ((a.y <= centre) != (b.y <= centre))
        crossings.push_back(a.x + (centre - a.y) * (double(b.x) - a.x) / (double(b.y) - a.y));
    }
    std::sort(crossings.begin(), crossings.end());
    for (size_t k = 0; k + 1 < crossings.size(); k += 2) {
      const int x1 = first_centre_from(crossings[k], width);
      const int x2 = first_centre_from(crossings[k + 1], width);
      if (x1 < x2) span(y, x1, x2);
    }
  }
}

int text_height(int scale) { return kGlyphHeight * scale; }

int text_width(const std::string& text, int scale) {
  std::string shown = printable(text);
  return stb_easy_font_width(shown.data()) * scale;
}

void draw_text(Image& image, int x, int y, const std::string& text, Rgb colour, int scale) {
  std::string shown = printable(text);
  std::vector<float> quads(shown.size() * 160 + 64);  // stb: about 270 bytes per character
  const int count = stb_easy_font_print(0, 0, shown.data(), nullptr, quads.data(),
                                        int(quads.size() * sizeof(float)));
  for (int q = 0; q < count; ++q) {
    const float* v = quads.data() + q * 16;  // 4 vertices of (x, y, z, rgba); 0 and 2 opposite
    fill_rect(image, x + int(v[0]) * scale, y + int(v[1]) * scale, x + int(v[8]) * scale,
              y + int(v[9]) * scale, colour);
  }
}

void draw_label(Image& image, int x, int y, const std::string& text, Rgb background, int scale) {
  fill_rect(image, x, y, x + text_width(text, scale) + 2 * scale, y + text_height(scale),
            background);
  draw_text(image, x + scale, y + scale, text, kWhite, scale);
}

Rgb class_colour(int cls) { return hsv_to_rgb({uint8_t((cls * 47) % 180), 220, 230}); }

}  // namespace bareyolo::data
