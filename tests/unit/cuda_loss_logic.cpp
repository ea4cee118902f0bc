// tests/unit/cuda_loss_logic.cpp — the CUDA loss's plain-C++ half (models/loss/head_loss.cuh), run
// without a GPU: the rows packed and grouped by cell, the per-level coefficients (from the counts,
// as the factors kernel computes them), and the kernels' per-thread bodies called serially over the
// indices the kernels cover, against yolo_loss<float> on random heads and random matched rows with
// several rows on one cell (the last one's objectness target wins) and an empty level. The
// gradients must be equal bit for bit (the same double terms added in float in the same row order,
// onto the zeros of the kernels' memset); the values to 1e-12 relative (only the order of the sums
// differs). What a GPU adds — launches, the tree sums, device memory — the selftest's loss
// checks cover (tools/selftest/loss_checks.cpp, run on a GPU by tests/cuda/selftest.cpp).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "models/loss/head_loss.cuh"
#include "tests/support/testing.h"
#include "tools/selftest/random_matched_rows.h"

using namespace bareyolo;
using namespace bareyolo::models;
using namespace bareyolo::testing;

TEST_CASE("the cuda loss's per-thread bodies run serially equal yolo_loss") {
  for (int classes : {1, 4})
    for (bool global_counts : {false, true}) {
      const double fl_gamma = global_counts ? 1.5 : 0.0;  // focal loss in half the cases
      CAPTURE(classes);
      CAPTURE(global_counts);
      Rng rng(120 + uint64_t(classes));
      const int images = 3, anchors = 3, outputs = classes + 5;
      const int sizes[] = {8, 4, 2};
      std::vector<std::vector<float>> head, expected_grad, grad;
      std::vector<Shape4> shapes;
      std::vector<std::vector<MatchedRow>> targets;
      for (int level = 0; level < 3; ++level) {
        shapes.push_back({images, anchors * outputs, sizes[level], sizes[level]});
        head.push_back(random_vector<float>(rng, shapes.back().numel(), -4, 4));
        // Both losses add into the gradient: start both from the same random values.
        expected_grad.push_back(random_vector<float>(rng, shapes.back().numel(), -1, 1));
        grad.push_back(expected_grad.back());
        // Level 2 matches nothing.
        targets.push_back(selftest::random_matched_rows(rng, level == 2 ? 0 : 60 / (level + 1),
                                                        images, anchors, sizes[level], sizes[level],
                                                        classes));
      }
      LossOptions options{scale_loss_gains({}, 3, classes, 320), classes};
      options.hyp.label_smoothing = 0.1;
      options.hyp.cls_pw = 1.3;
      options.hyp.obj_pw = 0.8;
      options.hyp.fl_gamma = fl_gamma;
      LossNormalization norm = local_normalization(targets, images);
      if (global_counts) norm = {Tensor::from_vector<double>({150, 70, 12, 8}, {1, 1, 1, 4}), 4};
      std::vector<View<const float>> predictions;
      std::vector<View<float>> expected_views, views;
      for (size_t l = 0; l < 3; ++l) {
        predictions.push_back(dense_view<const float>(head[l].data(), shapes[l]));
        expected_views.push_back(dense_view(expected_grad[l].data(), shapes[l]));
        views.push_back(dense_view(grad[l].data(), shapes[l]));
      }
      const LossValues expected =
          read_loss(yolo_loss<float>(predictions, targets, norm, options, expected_views));

      // What cuda::yolo_loss does, with its kernels as loops.
      const std::vector<LevelCells> level_cells = head_cells(shapes, classes);
      std::vector<loss_cuda::LevelArgs> levels;
      std::vector<LevelFactors> factors(3);
      int64_t cells = 0;
      for (int l = 0; l < 3; ++l) {
        levels.push_back(loss_cuda::level_args(predictions[size_t(l)], views[size_t(l)], l,
                                               level_cells[size_t(l)], norm.gradient_scale, options,
                                               cells, &factors[l]));
        cells += images * anchors * sizes[l] * sizes[l];
      }
      loss_cuda::Levels table;
      std::copy(levels.begin(), levels.end(), table.at);
      const double* counts = norm.counts.view<double>().data;
      for (int l = 0; l < 3; ++l) loss_cuda::level_factors_of(table, 3, counts, l, factors.data());
      const PackedRows packed(targets, level_cells);
      REQUIRE(packed.count() == int64_t(targets[0].size() + targets[1].size()));
      REQUIRE(packed.groups() < packed.count() - 10);  // cells with several rows
      const Rows rows = rows_in(packed.bytes().data());
      REQUIRE(rows.count == packed.count());
      REQUIRE(rows.groups == packed.groups());
      std::vector<double> tobj(size_t(cells), 0.0), row_terms(size_t(packed.count()));
      for (int64_t group = 0; group < packed.groups(); ++group)
        loss_cuda::box_group(table, rows, group, tobj.data(), row_terms.data());
      double cls = 0;
      if (classes > 1) {
        const double smoothing = 0.5 * options.hyp.label_smoothing;
        const loss_cuda::ClassTargets class_targets{classes, 1 - smoothing, smoothing,
                                                    options.hyp.cls_bce()};
        std::vector<double> terms(size_t(packed.groups() * classes));
        for (int64_t i = 0; i < packed.groups() * classes; ++i)
          loss_cuda::cls_element(table, rows, class_targets, i, terms.data());
        for (double t : terms) cls += t;
      }
      double box = 0, obj = 0;
      for (double t : row_terms) box += t;
      for (size_t l = 0; l < 3; ++l)
        for (int64_t i = 0; i < images * anchors * sizes[l] * sizes[l]; ++i)
          obj += loss_cuda::obj_cell(levels[l], options.hyp.obj_bce(), tobj.data(), i);

      double items[kLossItems];
      write_loss_items(options.hyp, counts[3], box, obj, cls, items);
      const std::pair<double, double> values[] = {{items[0], expected.box},
                                                  {items[1], expected.obj},
                                                  {items[2], expected.cls},
                                                  {items[3], expected.total}};
      for (const auto& [actual, wanted] : values)
        CHECK(std::fabs(actual - wanted) <= 1e-12 * std::fabs(wanted));
      for (size_t l = 0; l < 3; ++l) {
        CAPTURE(l);
        check_close(grad[l], expected_grad[l], 0, 0, "gradient");
      }
    }
}
