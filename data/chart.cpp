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

Chart::Chart(Image& image, ChartRegion region, const std::string& title,
             const std::string& x_label, const std::string& y_label,
             std::pair<double, double> x_range, std::pair<double, double> y_range)
    : image_(image),
      left_(region.x + kMarginLeft),
      top_(region.y + kMarginTop),
      right_(region.x + region.width - kMarginRight),
      bottom_(region.y + region.height - kMarginBottom),
      x_range_(widened(x_range)),
      y_range_(widened(y_range)) {
  draw_text(image_, region.x + (region.width - text_width(title)) / 2, region.y + 4, title, kBlack);
  const Rgb light = {225, 225, 225};
  for (double t : nice_ticks(x_range_.first, x_range_.second)) {
    const int x = int(std::lround(to_x(t)));
    draw_line(image_, x, top_, x, bottom_, 1, light);
    const std::string text = tick_text(t);
    draw_text(image_, x - text_width(text) / 2, bottom_ + 4, text, kBlack);
  }
  for (double t : nice_ticks(y_range_.first, y_range_.second)) {
    const int y = int(std::lround(to_y(t)));
    draw_line(image_, left_, y, right_, y, 1, light);
    const std::string text = tick_text(t);
    draw_text(image_, left_ - 4 - text_width(text), y - text_height() / 2 + 1, text, kBlack);
  }
  outline_rect(image_, left_, top_, right_ + 1, bottom_ + 1, 1, kBlack);
  draw_text(image_, (left_ + right_ - text_width(x_label)) / 2, bottom_ + 4 + text_height(),
            x_label, kBlack);
  draw_text(image_, region.x + 2, top_ - text_height(), y_label, kBlack);
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
    if (alone) {
      const int x = int(std::lround(to_x(xs[i]))), y = int(std::lround(to_y(ys[i])));
      fill_rect(image_, x - 2, y - 2, x + 3, y + 3, colour);
    } else if (i + 1 < n && finite(i + 1)) {
      draw_line(image_, to_x(xs[i]), to_y(ys[i]), to_x(xs[i + 1]), to_y(ys[i + 1]), thickness,
                colour);
    }
  }
}

void Chart::legend(const std::vector<std::pair<std::string, Rgb>>& entries) {
  int width = 0;
  for (const auto& [name, colour] : entries) width = std::max(width, text_width(name));
  const int x = right_ - width - 24, row = text_height() + 2;
  int y = top_ + 4;
  for (const auto& [name, colour] : entries) {
    fill_rect(image_, x, y + row / 2 - 1, x + 14, y + row / 2 + 1, colour);
    draw_text(image_, x + 18, y, name, kBlack);
    y += row;
  }
}

}  // namespace bareyolo::data
