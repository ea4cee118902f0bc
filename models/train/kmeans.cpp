// models/train/kmeans.cpp — see kmeans.h.
#include "models/train/kmeans.h"

#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>

#include "kernels/cpu/thread_pool.h"  // defines: parallel_for

namespace bareyolo::models {

namespace {

double squared_distance(const Point2& a, const Point2& b) {
  return (a[0] - b[0]) * (a[0] - b[0]) + (a[1] - b[1]) * (a[1] - b[1]);
}

// k distinct points, drawn uniformly (a partial Fisher-Yates shuffle of the indices).
std::vector<Point2> random_points(const std::vector<Point2>& points, int k, data::SampleRng& rng) {
  std::vector<size_t> order(points.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::vector<Point2> chosen;
  for (size_t i = 0; i < size_t(k); ++i) {
    std::swap(order[i], order[i + rng.below(order.size() - i)]);
    chosen.push_back(points[order[i]]);
  }
  return chosen;
}

// One Lloyd pass: assigns every point to its nearest centroid, returns the mean distance of
// that assignment and moves `centroids` to their points' means (dropping those without any).
// In parallel over fixed blocks of points whose sums are added in block order: the result
// does not depend on the number of threads.
double lloyd_pass(const std::vector<Point2>& points, std::vector<Point2>& centroids) {
  constexpr int64_t kBlock = 4096;
  struct BlockSums {
    std::vector<Point2> sums;
    std::vector<size_t> members;
    double distance = 0;
  };
  const int64_t n = int64_t(points.size());
  std::vector<BlockSums> blocks(size_t((n + kBlock - 1) / kBlock),
                                {std::vector<Point2>(centroids.size(), Point2{0, 0}),
                                 std::vector<size_t>(centroids.size(), 0), 0});
  parallel_for(n, kBlock, [&](int64_t first, int64_t last) {
    BlockSums& block = blocks[size_t(first / kBlock)];
    for (int64_t i = first; i < last; ++i) {
      const Point2& p = points[size_t(i)];
      size_t nearest = 0;
      double nearest_squared = std::numeric_limits<double>::infinity();
      for (size_t c = 0; c < centroids.size(); ++c)
        if (const double d = squared_distance(p, centroids[c]); d < nearest_squared)
          nearest = c, nearest_squared = d;
      block.distance += std::sqrt(nearest_squared);
      block.sums[nearest][0] += p[0], block.sums[nearest][1] += p[1];
      ++block.members[nearest];
    }
  });
  double total_distance = 0;
  std::vector<Point2> sums(centroids.size(), Point2{0, 0});
  std::vector<size_t> members(centroids.size(), 0);
  for (const BlockSums& block : blocks) {
    total_distance += block.distance;
    for (size_t c = 0; c < centroids.size(); ++c) {
      sums[c][0] += block.sums[c][0], sums[c][1] += block.sums[c][1];
      members[c] += block.members[c];
    }
  }
  std::vector<Point2> moved;
  for (size_t c = 0; c < centroids.size(); ++c)
    if (members[c] > 0) moved.push_back({sums[c][0] / members[c], sums[c][1] / members[c]});
  centroids = std::move(moved);
  return total_distance / double(points.size());
}

// Lloyd's iterations from `centroids` until the mean distance settles. The distance returned
// is that of the last assignment, measured before its centroids moved (as scipy reports it).
// Assignments stop changing after finitely many passes, so the cap (which scipy does not
// have) only bounds the time a pathological input could take.
KMeansResult lloyd(const std::vector<Point2>& points, std::vector<Point2> centroids,
                   double tolerance) {
  constexpr int kMaxPasses = 1000;
  double previous = std::numeric_limits<double>::infinity(), current = previous;
  for (int pass = 0; pass < kMaxPasses; ++pass) {
    current = lloyd_pass(points, centroids);
    if (!(std::fabs(previous - current) > tolerance)) break;
    previous = current;
  }
  return {std::move(centroids), current};
}

}  // namespace

KMeansResult kmeans(const std::vector<Point2>& points, int k, int restarts, data::SampleRng& rng,
                    double tolerance) {
  if (k < 1 || size_t(k) > points.size() || restarts < 1)
    throw std::invalid_argument("kmeans: k = " + std::to_string(k) + " clusters of " +
                                std::to_string(points.size()) + " points with " +
                                std::to_string(restarts) +
                                " restarts; need 1 <= k <= points and restarts >= 1");
  KMeansResult best{{}, std::numeric_limits<double>::infinity()};
  for (int run = 0; run < restarts; ++run) {
    KMeansResult result = lloyd(points, random_points(points, k, rng), tolerance);
    if (result.mean_distance < best.mean_distance) best = std::move(result);
  }
  return best;
}

}  // namespace bareyolo::models
