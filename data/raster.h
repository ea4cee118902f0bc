// data/raster.h — drawing on an Image, for every picture the project writes (show-batch,
// predict, the run's plots): filled and outlined rectangles, lines of any thickness, and text.
//
// Text uses stb_easy_font (libstb-dev), a tiny built-in vector font whose glyphs are made of
// axis-aligned quads: each quad is drawn as a filled rectangle, magnified by a whole `scale`,
// so text stays crisp without a font file. Everything clips at the image's edges.
#pragma once

#include <string>

#include "data/hsv.h"
#include "data/image.h"

namespace bareyolo::data {

inline constexpr Rgb kBlack = {0, 0, 0}, kWhite = {255, 255, 255}, kGrey = {160, 160, 160};

// The pixels x1 <= x < x2, y1 <= y < y2.
void fill_rect(Image& image, int x1, int y1, int x2, int y2, Rgb colour);
// The border of that rectangle, `thickness` pixels inside it.
void outline_rect(Image& image, int x1, int y1, int x2, int y2, int thickness, Rgb colour);
// A straight line from (x0, y0) to (x1, y1), `thickness` pixels wide (square pen).
void draw_line(Image& image, double x0, double y0, double x1, double y1, int thickness, Rgb colour);

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
