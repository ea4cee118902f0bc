// models/loss/head_loss.cuh — the pieces of the CUDA loss (models/loss/head_loss.cu) that are plain
// C++: the per-level arguments and the per-thread bodies of the kernels as __host__ __device__
// functions, over the matched rows as models/loss/loss_rows.h packs them. The kernels call
// them once per thread; a host loop over the same indices computes the same thing, which is
// how the index math and the grouping are checked on a machine without a GPU.
//
// Invariants: rows are sorted stably by (level, cell), so a group holds every row of one
// cell in its original order; each gradient element has one writer (box: fields 0-3 of a
// group's cell, cls: field 5 + c, obj: field 4 of every cell).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include "kernels/view.h"
#include "models/loss/loss.h"
#include "models/loss/loss_rows.h"
#include "models/loss/loss_terms.h"

namespace bareyolo::models::loss_cuda {

constexpr int kMaxLevels = 8;

struct LevelArgs {
  View<const float> head;
  View<float> grad;        // dense, the head's shape
  LevelCells cells;        // the head's, as the rows were staged for (loss_rows.h)
  int outputs = 0;         // channels per anchor: classes + 5
  int64_t first_cell = 0;  // of this level in the objectness-target buffer
  LevelWeights weights;    // what its factors take besides the counts (models/loss/loss.h)
  // The host loss's factors, in device memory: computed there from the counts (level_factors_of)
  const LevelFactors* factors = nullptr;

  BAREYOLO_HOST_DEVICE const float* logit(int image, int anchor, int field, int gj, int gi) const {
    return head.channel(image, int64_t(anchor) * outputs + field) + int64_t(gj) * cells.nx + gi;
  }
  BAREYOLO_HOST_DEVICE float* gradient(int image, int anchor, int field, int gj, int gi) const {
    return grad.channel(image, int64_t(anchor) * outputs + field) + int64_t(gj) * cells.nx + gi;
  }
};

struct Levels {
  LevelArgs at[kMaxLevels];
};

// The per-thread bodies of the kernels (head_loss.cu), so that a host loop can run them too.

// Level `level`'s factors into factors[level], from the counts the loss divides by (`counts`:
// n_i of each of the `level_count` levels, then the images; LossNormalization), where they are.
BAREYOLO_HOST_DEVICE inline void level_factors_of(const Levels& levels, int level_count,
                                                  const double* counts, int level,
                                                  LevelFactors* factors) {
  factors[level] = level_factors(levels.at[level].weights, counts[level], counts[level_count]);
}

// Group `group`: its rows' box terms and box gradient, and the objectness target of its cell.
BAREYOLO_HOST_DEVICE inline void box_group(const Levels& levels, const Rows& rows, int64_t group,
                                           double* tobj, double* row_terms) {
  const int first = rows.first[group], end = rows.first[group + 1];
  const LevelArgs& l = levels.at[rows.level[first]];
  const int image = rows.image[first], anchor = rows.anchor[first];
  const int gj = rows.gj[first], gi = rows.gi[first];
  double logit[4];
  for (int f = 0; f < 4; ++f) logit[f] = *l.logit(image, anchor, f, gj, gi);
  float gradient[4];  // what the gradient holds, then the rows' terms in order (as the host)
  for (int f = 0; f < 4; ++f) gradient[f] = *l.gradient(image, anchor, f, gj, gi);
  double last_ciou = 0;
  for (int r = first; r < end; ++r) {
    const RowBox box = row_box(logit, {rows.tx[r], rows.ty[r], rows.tw[r], rows.th[r]},
                               rows.anchor_w[r], rows.anchor_h[r]);
    row_terms[r] = (1 - box.ciou) / l.factors->rows;
    for (int f = 0; f < 4; ++f)
      gradient[f] += float(l.factors->box_grad * box.dciou[f] * box.dcoord[f]);
    last_ciou = box.ciou;
  }
  for (int f = 0; f < 4; ++f) *l.gradient(image, anchor, f, gj, gi) = gradient[f];
  tobj[l.first_cell + l.cells.cell_index(image, anchor, gj, gi)] = last_ciou < 0 ? 0.0 : last_ciou;
}

struct ClassTargets {
  int classes;
  double positive, negative;
  BceOptions bce;
};

// Element `index` = (group, class): the class term of the group's rows and its gradient.
BAREYOLO_HOST_DEVICE inline void cls_element(const Levels& levels, const Rows& rows,
                                             const ClassTargets& targets, int64_t index,
                                             double* cls_terms) {
  const int64_t group = index / targets.classes;
  const int c = int(index % targets.classes);
  const int first = rows.first[group], end = rows.first[group + 1];
  const LevelArgs& l = levels.at[rows.level[first]];
  const int image = rows.image[first], anchor = rows.anchor[first];
  const int gj = rows.gj[first], gi = rows.gi[first];
  const double logit = *l.logit(image, anchor, 5 + c, gj, gi);
  float gradient = *l.gradient(image, anchor, 5 + c, gj, gi);
  double sum = 0;
  for (int r = first; r < end; ++r) {
    const double t = c == rows.class_id[r] ? targets.positive : targets.negative;
    sum += loss_bce(logit, t, targets.bce) * l.factors->per_element;
    gradient += float(l.factors->cls_grad * loss_bce_grad(logit, t, targets.bce));
  }
  *l.gradient(image, anchor, 5 + c, gj, gi) = gradient;
  cls_terms[index] = sum;
}

// Cell i of level l (image-major, then anchor, gj, gi): adds the objectness gradient and
// returns the objectness term.
BAREYOLO_HOST_DEVICE inline double obj_cell(const LevelArgs& l, const BceOptions& obj_bce,
                                            const double* tobj, int64_t i) {
  const LevelCells& c = l.cells;
  const int64_t plane = int64_t(c.ny) * c.nx;
  const int64_t in_plane = i % plane, image_anchor = i / plane;
  const int gj = int(in_plane / c.nx), gi = int(in_plane % c.nx);
  const int anchor = int(image_anchor % c.anchors), image = int(image_anchor / c.anchors);
  const double t = tobj[l.first_cell + i];
  const double logit = *l.logit(image, anchor, 4, gj, gi);
  *l.gradient(image, anchor, 4, gj, gi) +=
      float(l.factors->obj_grad * loss_bce_grad(logit, t, obj_bce));
  return loss_bce(logit, t, obj_bce) * l.factors->per_cell;
}

// The arguments of one level: views, its cells (head_cells of the predictions, which the rows were
// staged for and models::yolo_loss checked) and the weights of its factors (level_weights);
// `factors` is where level_factors_of writes them.
inline LevelArgs level_args(const View<const float>& p, const View<float>& g, int level,
                            const LevelCells& cells, double gradient_scale,
                            const LossOptions& options, int64_t first_cell,
                            const LevelFactors* factors) {
  if (!(g.shape == p.shape) || !g.dense() || p.channels_last())
    throw std::invalid_argument("cuda::yolo_loss: the predictions of level " +
                                std::to_string(level) + " (" + p.shape.str() +
                                ") and their gradient must be NCHW, the gradient dense; got " +
                                (p.channels_last() ? "channels-last predictions" : g.shape.str()));
  LevelArgs l;
  l.head = p;
  l.grad = g;
  l.cells = cells;
  l.outputs = options.classes + 5;
  l.first_cell = first_cell;
  l.weights =
      level_weights(options, gradient_scale, size_t(level), cells.anchors, cells.ny, cells.nx);
  l.factors = factors;
  return l;
}

}  // namespace bareyolo::models::loss_cuda
