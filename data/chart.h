// data/chart.h — a line chart drawn into a region of an Image (data/raster.h): a framed plot
// area, "nice" ticks with their numbers on both axes, axis labels, a title, lines and dots in
// data coordinates, and a legend. The run's plots (results.png, the PR/F1/P/R curves) are
// built from it.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "data/raster.h"

namespace bareyolo::data {

// Tick values for [lo, hi]: multiples of 1, 2 or 5 times a power of ten, at most `max_ticks`
// (at least two when lo < hi), all inside [lo, hi].
std::vector<double> nice_ticks(double lo, double hi, int max_ticks = 6);

// [min, max] of the finite values of the series, widened when flat or empty.
std::pair<double, double> finite_range(const std::vector<std::vector<double>>& series);

struct ChartRegion {
  int x = 0, y = 0, width = 0, height = 0;  // in the image's pixels
};

class Chart {
 public:
  // Draws the frame, ticks, numbers, axis labels and title into `region` of `image`; data x in
  // [x_lo, x_hi] and y in [y_lo, y_hi] map onto the plot area inside the margins. Text and
  // margins are magnified by `scale` (for larger pictures).
  Chart(Image& image, ChartRegion region, const std::string& title, const std::string& x_label,
        const std::string& y_label, std::pair<double, double> x_range,
        std::pair<double, double> y_range, int scale = 1);

  // A polyline through (xs[i], ys[i]); a NaN breaks it, a lone finite point is a dot.
  void line(const std::vector<double>& xs, const std::vector<double>& ys, Rgb colour,
            int thickness = 1);
  // A filled square of side 2 * radius + 1 centred on the point (scatter plots).
  void dot(double x, double y, int radius, Rgb colour);
  // A bar from y = 0 up to `height` between x_lo and x_hi (histograms); none for height 0.
  void bar(double x_lo, double x_hi, double height, Rgb colour);
  // A legend row per entry, top right inside the plot area.
  void legend(const std::vector<std::pair<std::string, Rgb>>& entries);

  double to_x(double v) const;
  double to_y(double v) const;

 private:
  Image& image_;
  int scale_ = 1;
  int left_ = 0, top_ = 0, right_ = 0, bottom_ = 0;  // plot area, pixels
  std::pair<double, double> x_range_, y_range_;
};

}  // namespace bareyolo::data
