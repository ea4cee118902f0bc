// models/train/autoanchor.h — AutoAnchor: whether the model's anchors fit the training labels,
// and when they do not, anchors fitted to them (YOLOv5's utils/autoanchor.py). A new run does
// it before its first step (not a resumed one: its checkpoint holds the anchors it trains
// with); --noautoanchor turns it off.
//
// The labels' sizes: each label's width and height in pixels on its image resized so that its
// long side is imgsz. For the check, each image's sizes are also multiplied by a factor drawn
// uniformly in [0.9, 1.1), a stand-in for the scale augmentation.
//
// How well anchors fit: for a label of size wh and an anchor k, r = wh / k per dimension and
// x = min(r, 1/r) of the worse dimension; the anchor can match the label when x > 1/anchor_t
// (the loss's rule, models/loss/loss_targets.h). Two numbers, as YOLOv5 prints them:
//   best possible recall (BPR)  the fraction of labels that some anchor can match
//   anchors per target          the mean number of anchors that can match a label
//
// Above 0.98 BPR the anchors stay. Otherwise new ones are searched for:
//   1. k-means (kmeans.h) of the sizes (without the random factor; those with a side of at
//      least 2 px) divided by their standard deviation per dimension, 30 restarts; random
//      sizes up to imgsz when that cannot give as many anchors as the model has;
//   2. a genetic search of `generations` steps (1000): each step multiplies the anchors by
//      random factors (each, with probability 0.9, 1 + s * N(0, 1) * 0.1 clipped to
//      [0.3, 3], s uniform in [0, 1) once a step; at least 2 px) and keeps them when the
//      fitness, the mean over labels of best x where best x > 1/anchor_t (else 0), rises;
//   3. sorted by area, smallest first: the finest level gets the smallest.
// They replace the model's anchors only if their BPR (on the sizes with the random factor) is
// higher. Every random draw comes from the run's seed (the factors per image), so the result
// does not depend on the number of ranks.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "engine/distributed/comm/communicator.h"
#include "models/yolo/yolo_model.h"

namespace bareyolo::models {

using AnchorSize = std::array<float, 2>;  // width, height in pixels

struct AnchorFit {
  double best_possible_recall = 0;
  double anchors_per_target = 0;
};

// The train split's label sizes at `imgsz`, as above: with each image's random factor drawn
// from `seed` when `random_scale`, without it otherwise.
std::vector<AnchorSize> label_sizes(const data::Dataset& dataset, int imgsz, bool random_scale,
                                    uint64_t seed);

AnchorFit anchor_fit(const std::vector<AnchorSize>& sizes, const std::vector<AnchorSize>& anchors,
                     double anchor_t);

// Steps 1-3 above: `count` anchors for `sizes` (without the random factor).
using Log = std::function<void(const std::string&)>;
std::vector<AnchorSize> search_anchors(const std::vector<AnchorSize>& sizes, int count, int imgsz,
                                       double anchor_t, uint64_t seed, int generations,
                                       const Log& log);

struct AutoAnchorOptions {
  int imgsz = 640;
  double anchor_t = 4.0;
  uint64_t seed = 0;
  int generations = 1000;  // tests shorten the search
};

// Checks `model`'s anchors against the dataset's labels and gives it new ones when they are
// better, saying what it found and did in log lines ("AutoAnchor: 4.45 anchors/target, 0.957
// Best Possible Recall (BPR). ..."). Returns true when the anchors were replaced.
bool autoanchor(DetectionModel& model, const data::Dataset& dataset,
                const AutoAnchorOptions& options, const Log& log);

// A new run's anchors: rank 0 runs autoanchor() (when `enabled`) and every rank takes rank 0's
// anchors (one broadcast over `comm`; null: one process). Rank 0 decides because the ranks of
// one host would otherwise all run the same search on the same cores. Refuses, on every rank,
// a model still holding YOLOv5's placeholder anchors (`anchors: 3` in the model yaml or the hyp
// file): they match nothing, and dividing by their zero would train NaN.
void fit_run_anchors(DetectionModel& model, const data::Dataset& dataset,
                     const AutoAnchorOptions& options, bool enabled, int rank,
                     dist::Communicator* comm, const Log& log);

}  // namespace bareyolo::models
