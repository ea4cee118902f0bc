// data/raster.h — drawing on an Image, for every picture the project writes (show-batch,
// predict, the run's plots): filled and outlined rectangles, lines of any thickness, and text;
// and the pixels a polygon covers (copy-paste's mask).
//
// Text uses stb_easy_font (libstb-dev), a tiny built-in vector font whose glyphs are made of
// axis-aligned quads: each quad is drawn as a filled rectangle, magnified by a whole `scale`,
// so text stays crisp without a font file. Everything clips at the image's edges.
#pragma once

#include <functional>
#include <string>

#include "data/hsv.h"
#include "data/image.h"
#include "data/label_file.h"  // defines: Polygon

namespace bareyolo::data {

inline constexpr Rgb kBlack = {0, 0, 0}, kWhite = {255, 255, 255}, kGrey = {160, 160, 160};

// The pixels x1 <= x < x2, y1 <= y < y2.
void fill_rect(Image& image, int x1, int y1, int x2, int y2, Rgb colour);
// The border of that rectangle, `thickness` pixels inside it.
void outline_rect(Image& image, int x1, int y1, int x2, int y2, int thickness, Rgb colour);
// A straight line from (x0, y0) to (x1, y1), `thickness` pixels wide (square pen).
void draw_line(Image& image, double x0, double y0, double x1, double y1, int thickness, Rgb colour);
// The pixels of a width x height image whose centres (x + 0.5, y + 0.5) lie inside `polygon`
// (pixel coordinates, even-odd rule; a centre on a left edge is inside, on a right edge
// outside, so the rectangle (x1, y1)-(x2, y2) covers exactly fill_rect's pixels), row by row:
// span(y, x1, x2) for the pixels x1 <= x < x2 of row y. Fewer than 3 points cover nothing.
void polygon_spans(const Polygon& polygon, int width, int height,
                   const std::function<void(int y, int x1, int x2)>& span);

// Text height and width in pixels at `scale`; printable ASCII only (anything else is '?').
int text_height(int scale = 1);
int text_width(const std::string& text, int scale = 1);
// Draws `text` with its top-left corner at (x, y).
void draw_text(Image& image, int x, int y, const std::string& text, Rgb colour, int scale = 1);
// White text on a filled `background` box hugging it (a box's class label).
void draw_label(Image& image, int x, int y, const std::string& text, Rgb background, int scale = 1);

// A distinct, saturated colour per class index (well-spread hues).
Rgb class_colour(int cls);

}  // namespace bareyolo::data
