// models/loss/loss_terms.h — the per-element math of YOLOv5's loss (models/loss/loss.h), shared by
// the host loss (models/loss/loss.cpp) and the CUDA loss (models/loss/head_loss.cu) so both
// evaluate the same formulas in the same order, in double:
//   BCE with logits, YOLOv5's pos_weight form, and its derivative: bce and bce_grad, the
//   sigmoid family's one definition for every device (kernels/activation.h), wrapped in
//   YOLOv5's focal loss when the hyp file's fl_gamma > 0 (loss_bce, loss_bce_grad);
//   the box term of one matched row: CIoU of the decoded prediction against the target and
//   the derivative of CIoU with respect to each of the four box logits.
#pragma once

#include <math.h>

#include "kernels/activation.h"  // sigmoid, bce, bce_grad
#include "models/loss/ciou.h"

namespace bareyolo::models {

// The BCE terms of the objectness and class losses: BCE with logits and YOLOv5's pos_weight,
// and with focal_gamma > 0 YOLOv5's FocalLoss around it (utils/loss.py; alpha fixed at 0.25):
//   p = s(x),  m = 1 - p_t = t (1 - p) + (1 - t) p,  a = t alpha + (1 - t)(1 - alpha)
//   l = bce(x, t) a m^gamma
//   dl/dx = a (bce'(x) m^gamma + bce(x) gamma m^(gamma - 1) dm/dx),  dm/dx = (1 - 2t) p (1 - p)
// The targets t may lie between 0 and 1 (objectness: the CIoU; classes: smoothed), which the
// formula takes as it is. focal_gamma = 0 is the plain BCE, evaluated exactly as without it.
struct BceOptions {
  double pos_weight = 1;
  double focal_gamma = 0;
};
inline constexpr double kFocalAlpha = 0.25;  // FocalLoss's default, which YOLOv5 keeps

// An element's focal factors: p = sigmoid(x), m = 1 - p_t (the probability the prediction
// leaves the target) and a = alpha_t.
struct FocalFactors {
  double p, m, a;
};
BAREYOLO_HOST_DEVICE inline FocalFactors focal_factors(double x, double t) {
  const double p = sigmoid(x);
  return {p, t * (1 - p) + (1 - t) * p, t * kFocalAlpha + (1 - t) * (1 - kFocalAlpha)};
}

BAREYOLO_HOST_DEVICE inline double loss_bce(double x, double t, const BceOptions& o) {
  const double plain = bce(x, t, o.pos_weight);
  if (o.focal_gamma == 0) return plain;
  const auto [p, m, a] = focal_factors(x, t);
  return plain * a * ::pow(m, o.focal_gamma);
}

BAREYOLO_HOST_DEVICE inline double loss_bce_grad(double x, double t, const BceOptions& o) {
  const double plain_grad = bce_grad(x, t, o.pos_weight);
  if (o.focal_gamma == 0) return plain_grad;
  const auto [p, m, a] = focal_factors(x, t);
  const double dm = (1 - 2 * t) * p * (1 - p);
  // m = 0 only where p has saturated to 0 or 1, and then dm = 0 too: the product's limit is 0
  // for gamma >= 1 and the term is left out (m^(gamma - 1) would be infinite below 1).
  const double modulation_grad = m > 0 ? o.focal_gamma * ::pow(m, o.focal_gamma - 1) * dm : 0;
  return a * (plain_grad * ::pow(m, o.focal_gamma) + bce(x, t, o.pos_weight) * modulation_grad);
}

// The box term of one matched row.
struct RowBox {
  double ciou;       // CIoU of the prediction against the target
  double alpha;      // CIoU's detached aspect-ratio weight
  double dciou[4];   // d CIoU / d (cx, cy, w, h) of the prediction
  double dcoord[4];  // d (cx, cy, w, h) / d logit: the chain to the head's four box logits
};

// The prediction decoded from its box logits: xy = 2 s - 0.5, wh = (2 s)^2 * anchor
// (s = sigmoid), then CIoU against `target` (xy offsets from the cell corner, wh, in grid
// units). fixed_alpha >= 0 replaces alpha (see complete_iou).
BAREYOLO_HOST_DEVICE inline RowBox row_box(const double logit[4], const Box& target,
                                           double anchor_w, double anchor_h,
                                           double fixed_alpha = -1) {
  double s[4];
  for (int f = 0; f < 4; ++f) s[f] = sigmoid(logit[f]);
  const Dual<4> x = Dual<4>::variable(2 * s[0] - 0.5, 0);
  const Dual<4> y = Dual<4>::variable(2 * s[1] - 0.5, 1);
  const Dual<4> w = Dual<4>::variable(4 * s[2] * s[2] * anchor_w, 2);
  const Dual<4> h = Dual<4>::variable(4 * s[3] * s[3] * anchor_h, 3);
  const CiouTerms<Dual<4>> terms = complete_iou(x, y, w, h, target, fixed_alpha);
  RowBox box{terms.ciou.value,
             terms.alpha,
             {terms.ciou.d[0], terms.ciou.d[1], terms.ciou.d[2], terms.ciou.d[3]},
             {2 * s[0] * (1 - s[0]), 2 * s[1] * (1 - s[1]), 8 * s[2] * s[2] * (1 - s[2]) * anchor_w,
              8 * s[3] * s[3] * (1 - s[3]) * anchor_h}};
  return box;
}

}  // namespace bareyolo::models
