// models/train/autoanchor.cpp — see autoanchor.h.
#include "models/train/autoanchor.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <numbers>
#include <stdexcept>

#include "data/rng.h"                 // defines: SampleRng (the run's random streams)
#include "kernels/cpu/thread_pool.h"  // defines: parallel_for
#include "models/train/kmeans.h"      // defines: kmeans

namespace bareyolo::models {

namespace {

// AutoAnchor's streams of the run's seed, apart from the loader's (whose middle key is an
// epoch): image i's random factor comes from stream (kScaleStream, i), the search's draws
// from stream (kSearchStream, 0).
constexpr uint64_t kScaleStream = 0x4155544f414e4348ull;  // "AUTOANCH"
constexpr uint64_t kSearchStream = kScaleStream + 1;

constexpr double kGoodRecall = 0.98;  // at or below it, new anchors are searched for
constexpr int kKMeansRestarts = 30;
constexpr double kMutationProbability = 0.9, kMutationSigma = 0.1;
constexpr float kMinMutation = 0.3f, kMaxMutation = 3.0f;
constexpr float kMinAnchorPixels = 2;  // the search's anchors, and the labels k-means sees
constexpr char kPrefix[] = "AutoAnchor: ";

template <class... Numbers>
std::string format(const char* pattern, Numbers... numbers) {
  char text[160];
  std::snprintf(text, sizeof text, pattern, numbers...);
  return text;
}

// "10,13, 16,30, ...": anchors as YOLOv5 prints them (whole pixels).
std::string anchors_text(const std::vector<AnchorSize>& anchors) {
  std::string text;
  for (const AnchorSize& k : anchors)
    text += (text.empty() ? "" : ", ") + std::to_string(std::lround(k[0])) + "," +
            std::to_string(std::lround(k[1]));
  return text;
}

// One label against every anchor: the best metric, and how many anchors pass the threshold.
struct LabelMatch {
  float best = 0;
  int above = 0;
};

// Per label. How well anchor k fits a label of size wh: min(r, 1/r) over both dimensions of
// r = wh / k, in float and with divisions, as YOLOv5 computes it (a zero placeholder anchor
// gives 0). Anchor by anchor over a block of labels, so that the compiler vectorises the
// labels; in parallel over blocks, and each label's result computed alone, so that sums over
// them (in order, by the callers) do not depend on the threads. The search evaluates this
// 1000 times: on COCO's 860k labels that is the whole cost of AutoAnchor.
std::vector<LabelMatch> label_matches(const std::vector<AnchorSize>& sizes,
                                      const std::vector<AnchorSize>& anchors, float threshold) {
  std::vector<LabelMatch> matches(sizes.size());
  parallel_for(int64_t(sizes.size()), 4096, [&](int64_t first, int64_t last) {
    for (const AnchorSize& k : anchors)
      for (size_t i = size_t(first); i < size_t(last); ++i) {
        const float rw = sizes[i][0] / k[0], rh = sizes[i][1] / k[1];
        const float x = std::min(std::min(rw, 1 / rw), std::min(rh, 1 / rh));
        matches[i].best = std::max(matches[i].best, x);
        matches[i].above += x > threshold;
      }
  });
  return matches;
}

float match_threshold(double anchor_t) { return float(1 / anchor_t); }

// The search's fitness: the mean over labels of the best metric where it passes the threshold.
double fitness(const std::vector<AnchorSize>& sizes, const std::vector<AnchorSize>& anchors,
               float threshold) {
  double total = 0;
  for (const LabelMatch& m : label_matches(sizes, anchors, threshold))
    total += m.best > threshold ? m.best : 0;
  return total / double(sizes.size());
}

void sort_by_area(std::vector<AnchorSize>& anchors) {
  std::stable_sort(anchors.begin(), anchors.end(), [](const AnchorSize& a, const AnchorSize& b) {
    return a[0] * a[1] < b[0] * b[1];
  });
}

// A standard normal draw (Box-Muller; 1 - u keeps the logarithm's argument in (0, 1]).
double normal(data::SampleRng& rng) {
  const double u = 1 - rng.uniform(), v = rng.uniform();
  return std::sqrt(-2 * std::log(u)) * std::cos(2 * std::numbers::pi * v);
}

// Step 1: k-means of the sizes whitened by their standard deviation, or `count` random sizes
// (sorted, in [0, imgsz)) when it cannot give `count` anchors: fewer labels than anchors, a
// dimension without spread, or clusters left empty.
std::vector<AnchorSize> kmeans_anchors(const std::vector<AnchorSize>& sizes, int count, int imgsz,
                                       data::SampleRng& rng, const Log& log) {
  std::vector<Point2> points;
  for (const AnchorSize& wh : sizes)
    if (wh[0] >= kMinAnchorPixels || wh[1] >= kMinAnchorPixels) points.push_back({wh[0], wh[1]});
  Point2 mean{0, 0}, deviation{0, 0};
  for (const Point2& p : points) mean[0] += p[0], mean[1] += p[1];
  for (double& m : mean) m /= std::max<double>(1, double(points.size()));
  for (const Point2& p : points)
    for (int d = 0; d < 2; ++d) deviation[d] += (p[d] - mean[d]) * (p[d] - mean[d]);
  for (double& s : deviation) s = std::sqrt(s / std::max<double>(1, double(points.size())));

  if (size_t(count) <= points.size() && deviation[0] > 0 && deviation[1] > 0) {
    log(std::string(kPrefix) + "Running kmeans for " + std::to_string(count) + " anchors on " +
        std::to_string(points.size()) + " points...");
    for (Point2& p : points) p[0] /= deviation[0], p[1] /= deviation[1];
    const KMeansResult clusters = kmeans(points, count, kKMeansRestarts, rng);
    if (clusters.centroids.size() == size_t(count)) {
      std::vector<AnchorSize> anchors;
      for (const Point2& c : clusters.centroids)
        anchors.push_back({float(c[0] * deviation[0]), float(c[1] * deviation[1])});
      return anchors;
    }
  }
  log(std::string(kPrefix) + "WARNING switching strategies from kmeans to random init");
  std::vector<float> values(size_t(2 * count));
  for (float& v : values) v = float(rng.uniform() * imgsz);
  std::sort(values.begin(), values.end());
  std::vector<AnchorSize> anchors;
  for (size_t i = 0; i < values.size(); i += 2) anchors.push_back({values[i], values[i + 1]});
  return anchors;
}

// Step 2: one generation's factors, at least one of them not 1.
std::vector<AnchorSize> mutation(size_t count, data::SampleRng& rng) {
  std::vector<AnchorSize> factors(count);
  bool changed = false;
  while (!changed) {
    const double strength = rng.uniform();
    for (AnchorSize& f : factors)
      for (float& v : f) {
        v = 1;
        if (rng.chance(kMutationProbability))
          v = std::clamp(float(1 + strength * normal(rng) * kMutationSigma), kMinMutation,
                         kMaxMutation);
        changed = changed || v != 1;
      }
  }
  return factors;
}

// Anchors in a model's order as its levels (set_anchors' argument), and back.
std::vector<std::vector<double>> as_levels(const std::vector<AnchorSize>& anchors, int levels) {
  std::vector<std::vector<double>> pixels(static_cast<size_t>(levels));
  const size_t per_level = anchors.size() / size_t(levels);
  for (size_t i = 0; i < anchors.size(); ++i)
    pixels[i / per_level].insert(pixels[i / per_level].end(), anchors[i].begin(), anchors[i].end());
  return pixels;
}
std::vector<AnchorSize> flattened(const std::vector<std::vector<double>>& levels) {
  std::vector<AnchorSize> anchors;
  for (const std::vector<double>& level : levels)
    for (size_t k = 0; k + 1 < level.size(); k += 2)
      anchors.push_back({float(level[k]), float(level[k + 1])});
  return anchors;
}

}  // namespace

std::vector<AnchorSize> label_sizes(const data::Dataset& dataset, int imgsz, bool random_scale,
                                    uint64_t seed) {
  std::vector<AnchorSize> sizes;
  for (int64_t i = 0; i < dataset.size(); ++i) {
    const data::ImageRecord& image = dataset.record(i);
    // In double, in YOLOv5's order: the resized image's size, times the factor, times the
    // normalised label size.
    const double long_side = std::max(image.width, image.height);
    double width = double(imgsz) * image.width / long_side;
    double height = double(imgsz) * image.height / long_side;
    if (random_scale) {
      const double factor = data::SampleRng(seed, kScaleStream, uint64_t(i)).uniform(0.9, 1.1);
      width *= factor, height *= factor;
    }
    for (const data::LabelBox& box : image.boxes)
      sizes.push_back({float(box.w * width), float(box.h * height)});
  }
  return sizes;
}

AnchorFit anchor_fit(const std::vector<AnchorSize>& sizes, const std::vector<AnchorSize>& anchors,
                     double anchor_t) {
  if (sizes.empty()) return {};
  const float threshold = match_threshold(anchor_t);
  double recalled = 0, above = 0;
  for (const LabelMatch& m : label_matches(sizes, anchors, threshold))
    recalled += m.best > threshold, above += m.above;
  return {recalled / double(sizes.size()), above / double(sizes.size())};
}

std::vector<AnchorSize> search_anchors(const std::vector<AnchorSize>& sizes, int count, int imgsz,
                                       double anchor_t, uint64_t seed, int generations,
                                       const Log& log) {
  data::SampleRng rng(seed, kSearchStream, 0);
  std::vector<AnchorSize> anchors = kmeans_anchors(sizes, count, imgsz, rng, log);
  sort_by_area(anchors);
  // The fitness counts the labels k-means saw (a side of at least 2 px).
  std::vector<AnchorSize> seen;
  std::copy_if(sizes.begin(), sizes.end(), std::back_inserter(seen), [](const AnchorSize& wh) {
    return wh[0] >= kMinAnchorPixels || wh[1] >= kMinAnchorPixels;
  });
  if (seen.empty()) return anchors;
  const float threshold = match_threshold(anchor_t);
  double best = fitness(seen, anchors, threshold);
  for (int generation = 0; generation < generations; ++generation) {
    const std::vector<AnchorSize> factors = mutation(anchors.size(), rng);
    std::vector<AnchorSize> candidate = anchors;
    for (size_t i = 0; i < candidate.size(); ++i)
      for (int d = 0; d < 2; ++d)
        candidate[i][d] = std::max(candidate[i][d] * factors[i][d], kMinAnchorPixels);
    if (const double f = fitness(seen, candidate, threshold); f > best)
      best = f, anchors = std::move(candidate);
  }
  sort_by_area(anchors);
  return anchors;
}

bool autoanchor(DetectionModel& model, const data::Dataset& dataset,
                const AutoAnchorOptions& options, const Log& log) {
  const std::vector<AnchorSize> sizes = label_sizes(dataset, options.imgsz, true, options.seed);
  const std::vector<AnchorSize> current = flattened(model.pixel_anchors());
  const AnchorFit before = anchor_fit(sizes, current, options.anchor_t);
  const std::string fit = format("%.2f anchors/target, %.3f Best Possible Recall (BPR). ",
                                 before.anchors_per_target, before.best_possible_recall);
  if (before.best_possible_recall > kGoodRecall) {
    log(kPrefix + fit + "Current anchors are a good fit to dataset");
    return false;
  }
  log(kPrefix + fit + "Anchors are a poor fit to dataset, attempting to improve...");

  const std::vector<AnchorSize> unscaled = label_sizes(dataset, options.imgsz, false, 0);
  size_t small = 0;
  for (const AnchorSize& wh : unscaled) small += wh[0] < 3 || wh[1] < 3;
  if (small > 0)
    log(kPrefix + std::string("WARNING Extremely small objects found: ") + std::to_string(small) +
        " of " + std::to_string(unscaled.size()) + " labels are <3 pixels in size");
  const std::vector<AnchorSize> found =
      search_anchors(unscaled, int(current.size()), options.imgsz, options.anchor_t, options.seed,
                     options.generations, log);
  const AnchorFit after = anchor_fit(sizes, found, options.anchor_t);
  const std::string found_fit =
      format("the new anchors give %.2f anchors/target, %.3f Best Possible Recall (BPR)",
             after.anchors_per_target, after.best_possible_recall);
  if (!(after.best_possible_recall > before.best_possible_recall)) {
    log(kPrefix + found_fit +
        ": Done (original anchors better than new anchors, proceeding with original anchors)");
    return false;
  }
  model.set_anchors(as_levels(found, model.num_levels()));
  log(kPrefix + found_fit + ": Done, training with them (in pixels: " + anchors_text(found) +
      "; the run's weights carry them)");
  return true;
}

void fit_run_anchors(DetectionModel& model, const data::Dataset& dataset,
                     const AutoAnchorOptions& options, bool enabled, int rank,
                     dist::Communicator* comm, const Log& log) {
  if (enabled && rank == 0) autoanchor(model, dataset, options, log);
  if (comm) {
    // Every rank, rank 0 too, sets what rank 0 sent: the same anchors everywhere. (They come
    // back unchanged: fp16 grid values times power-of-two strides are floats, and their order
    // needs no flip.)
    std::vector<AnchorSize> anchors = flattened(model.pixel_anchors());
    comm->broadcast(dist::CommBuffer::of(anchors.front().data(), int64_t(2 * anchors.size())), 0,
                    "anchors")
        ->wait();
    model.set_anchors(as_levels(anchors, model.num_levels()));
  }
  for (const AnchorSize& k : flattened(model.pixel_anchors()))
    if (!(k[0] > 0 && k[1] > 0))
      throw std::invalid_argument(
          enabled ? "AutoAnchor found no anchors that match more labels than the placeholders "
                    "of `anchors: N` (the model yaml's or the hyp file's) at anchor_t " +
                        format("%g", options.anchor_t) +
                        ": check the labels' sizes, or list anchors in the model yaml"
                  : "the model holds the placeholders of `anchors: N` (its yaml or the hyp "
                    "file's), which only AutoAnchor turns into anchors, and --noautoanchor is "
                    "given: drop --noautoanchor, or list anchors in the model yaml");
}

}  // namespace bareyolo::models
