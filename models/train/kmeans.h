// models/train/kmeans.h — k-means clustering of 2-D points, the way scipy.cluster.vq.kmeans
// runs it (which YOLOv5's AutoAnchor calls on whitened label sizes):
//
//   `restarts` times: start from k distinct points drawn at random, then Lloyd's iterations
//   (each point to its nearest centroid, each centroid to the mean of its points; a centroid
//   left without points is dropped) until the mean distance from a point to its centroid
//   changes by no more than `tolerance`. The run with the lowest mean distance wins.
//
// Distances are Euclidean (not squared), as scipy's. A run that dropped centroids returns
// fewer than k: the caller decides what that means (AutoAnchor falls back to random anchors).
#pragma once

#include <array>
#include <vector>

#include "data/rng.h"

namespace bareyolo::models {

using Point2 = std::array<double, 2>;

struct KMeansResult {
  std::vector<Point2> centroids;  // at most k
  double mean_distance = 0;       // from each point to its nearest centroid
};

// Requires 1 <= k <= points.size() and restarts >= 1 (throws std::invalid_argument).
KMeansResult kmeans(const std::vector<Point2>& points, int k, int restarts, data::SampleRng& rng,
                    double tolerance = 1e-5);

}  // namespace bareyolo::models
