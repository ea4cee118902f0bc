// data/chart.cpp — see chart.h.
#include "data/chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace bareyolo::data {

namespace {

constexpr int kMarginLeft = 44, kMarginRight = 8, kMarginTop = 18, kMarginBottom = 30;

std::string tick_text(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g", std::abs(v) < 1e-12 ? 0.0 : v);
  return text;
}

// A range that is never empty: a flat one is widened around its value.
std::pair<double, double> widened(std::pair<double, double> range) {
  auto [lo, hi] = range;
  if (!(hi - lo > 1e-12 * std::max(1.0, std::abs(hi)))) {
    const double pad = std::max(std::abs(hi) * 0.05, 1e-3);
    return {lo - pad, hi + pad};
  }
  return {lo, hi};
}

}  // namespace

std::vector<double> nice_ticks(double lo, double hi, int max_ticks) {
  if (!(hi > lo) || max_ticks < 2) return {lo};
  const double raw = (hi - lo) / double(max_ticks - 1);
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  double step = 10 * power;
  for (double m : {1.0, 2.0, 5.0})
    if (m * power >= raw) {
      step = m * power;
      break;
    }
  std::vector<double> ticks;
  // Multiples of the step, each computed afresh so no rounding accumulates.
  for (double k = std::ceil(lo / step - 1e-9); k * step <= hi + step * 1e-9; ++k)
    ticks.push_back(k * step);
  return ticks;
}

std::pair<double, double> finite_range(const std::vector<std::vector<double>>& series) {
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (const std::vector<double>& values : series)
    for (double v : values)
      if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
  if (!std::isfinite(lo)) return {0, 1};
  return widened({lo, hi});
}

Chart::Chart(Image& image, ChartRegion region, const std::string& title, const std::string& x_label,
             const std::string& y_label, std::pair<double, double> x_range,
             std::pair<double, double> y_range, int scale)
    : image_(image),
      scale_(scale),
      left_(region.x + kMarginLeft * scale),
      top_(region.y + kMarginTop * scale),
      right_(region.x + region.width - kMarginRight * scale),
      bottom_(region.y + region.height - kMarginBottom * scale),
      x_range_(widened(x_range)),
      y_range_(widened(y_range)) {
  draw_text(image_, region.x + (region.width - text_width(title, scale_)) / 2,
            region.y + 4 * scale_, title, kBlack, scale_);
  const Rgb light = {225, 225, 225};
  for (double t : nice_ticks(x_range_.first, x_range_.second)) {
    const int x = int(std::lround(to_x(t)));
    draw_line(image_, x, top_, x, bottom_, 1, light);
    const std::string text = tick_text(t);
    draw_text(image_, x - text_width(text, scale_) / 2, bottom_ + 4 * scale_, text, kBlack, scale_);
  }
  for (double t : nice_ticks(y_range_.first, y_range_.second)) {
    const int y = int(std::lround(to_y(t)));
    draw_line(image_, left_, y, right_, y, 1, light);
    const std::string text = tick_text(t);
    draw_text(image_, left_ - 4 * scale_ - text_width(text, scale_),
              y - text_height(scale_) / 2 + scale_, text, kBlack, scale_);
  }
  outline_rect(image_, left_, top_, right_ + 1, bottom_ + 1, 1, kBlack);
  draw_text(image_, (left_ + right_ - text_width(x_label, scale_)) / 2,
            bottom_ + 4 * scale_ + text_height(scale_), x_label, kBlack, scale_);
  draw_text(image_, region.x + 2 * scale_, region.y + 4 * scale_, y_label, kBlack,
            scale_);  // title row
}

double Chart::to_x(double v) const {
  return left_ + (v - x_range_.first) / (x_range_.second - x_range_.first) * (right_ - left_);
}

double Chart::to_y(double v) const {
  return bottom_ - (v - y_range_.first) / (y_range_.second - y_range_.first) * (bottom_ - top_);
}

void Chart::line(const std::vector<double>& xs, const std::vector<double>& ys, Rgb colour,
                 int thickness) {
  const size_t n = std::min(xs.size(), ys.size());
  auto finite = [&](size_t i) { return std::isfinite(xs[i]) && std::isfinite(ys[i]); };
  for (size_t i = 0; i < n; ++i) {
    if (!finite(i)) continue;
    const bool alone = (i == 0 || !finite(i - 1)) && (i + 1 == n || !finite(i + 1));
    if (alone)
      dot(xs[i], ys[i], 2, colour);
    else if (i + 1 < n && finite(i + 1)) {
      draw_line(image_, to_x(xs[i]), to_y(ys[i]), to_x(xs[i + 1]), to_y(ys[i + 1]), thickness,
                colour);
    }
  }
}

void Chart::dot(double x, double y, int radius, Rgb colour) {
  const int px = int(std::lround(to_x(x))), py = int(std::lround(to_y(y)));
  fill_rect(image_, px - radius, py - radius, px + radius + 1, py + radius + 1, colour);
}

void Chart::bar(double x_lo, double x_hi, double height, Rgb colour) {
  if (height == 0) return;  // an empty bin: nothing over the frame's baseline
  const double y0 = to_y(0), y1 = to_y(height);
  fill_rect(image_, int(std::lround(to_x(x_lo))), int(std::lround(std::min(y0, y1))),
            int(std::lround(to_x(x_hi))), int(std::lround(std::max(y0, y1))) + 1, colour);
}

void Chart::legend(const std::vector<std::pair<std::string, Rgb>>& entries) {
  int width = 0;
  for (const auto& [name, colour] : entries) width = std::max(width, text_width(name, scale_));
  const int x = right_ - width - 24 * scale_, row = text_height(scale_) + 2 * scale_;
  int y = top_ + 4 * scale_;
  for (const auto& [name, colour] : entries) {
    fill_rect(image_, x, y + row / 2 - scale_, x + 14 * scale_, y + row / 2 + scale_, colour);
    draw_text(image_, x + 18 * scale_, y, name, kBlack, scale_);
    y += row;
  }
}

}  // namespace bareyolo::data
