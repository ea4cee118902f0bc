// models/loss/ciou.h — Complete-IoU of a predicted box against a target box, both (cx, cy, w, h),
// as YOLOv5's box loss computes it (eps = 1e-7):
//
//   iou  = inter / (w1 h1 + w2 h2 - inter + eps)
//   c2   = (enclosing box width)^2 + (enclosing box height)^2 + eps
//   rho2 = squared distance between the centres
//   v    = 4 / pi^2 (atan(w2 / h2) - atan(w1 / h1))^2,   alpha = v / (v - iou + 1 + eps)
//   CIoU = iou - (rho2 / c2 + v * alpha)
//
// alpha is a constant for differentiation (YOLOv5 computes it without gradient). The
// prediction's coordinates may be Dual numbers, which carry the partial derivatives with
// respect to (cx, cy, w, h) through every operation: the gradient of the loss is then exact
// and follows the same branch choices (min, max, clamp) as the forward.
//
// Everything here is also device code (BAREYOLO_HOST_DEVICE): the CUDA loss
// (models/loss/head_loss.cu) runs these same functions, in double, so host and device share one
// definition of the formulas. Hence plain arrays and ::atan (CUDA declares it for both sides;
// on the host it is the C library's, as std::atan(double)).
#pragma once

#include <math.h>

#include "kernels/view.h"  // BAREYOLO_HOST_DEVICE

namespace bareyolo::models {

// A value and its derivatives with respect to N inputs (forward-mode differentiation).
template <int N>
struct Dual {
  double value = 0;
  double d[N] = {};

  BAREYOLO_HOST_DEVICE static Dual variable(double v, int which) {
    Dual x(v);
    x.d[which] = 1;
    return x;
  }
  BAREYOLO_HOST_DEVICE friend Dual operator+(Dual a, const Dual& b) {
    a.value += b.value;
    for (int i = 0; i < N; ++i) a.d[i] += b.d[i];
    return a;
  }
  BAREYOLO_HOST_DEVICE friend Dual operator-(Dual a, const Dual& b) {
    a.value -= b.value;
    for (int i = 0; i < N; ++i) a.d[i] -= b.d[i];
    return a;
  }
  BAREYOLO_HOST_DEVICE friend Dual operator*(const Dual& a, const Dual& b) {
    Dual r(a.value * b.value);
    for (int i = 0; i < N; ++i) r.d[i] = a.d[i] * b.value + a.value * b.d[i];
    return r;
  }
  BAREYOLO_HOST_DEVICE friend Dual operator/(const Dual& a, const Dual& b) {
    Dual r(a.value / b.value);
    for (int i = 0; i < N; ++i)
      r.d[i] = (a.d[i] * b.value - a.value * b.d[i]) / (b.value * b.value);
    return r;
  }
  // A constant: all derivatives 0.
  BAREYOLO_HOST_DEVICE Dual(double v = 0) : value(v) {}
};

BAREYOLO_HOST_DEVICE inline double atan_of(double x) { return ::atan(x); }
template <int N>
BAREYOLO_HOST_DEVICE Dual<N> atan_of(const Dual<N>& x) {
  Dual<N> r(::atan(x.value));
  for (int i = 0; i < N; ++i) r.d[i] = x.d[i] / (1 + x.value * x.value);
  return r;
}

BAREYOLO_HOST_DEVICE inline double value_of(double x) { return x; }
template <int N>
BAREYOLO_HOST_DEVICE double value_of(const Dual<N>& x) {
  return x.value;
}

// min/max/clamp pick an operand by value; its derivatives come along.
template <class S>
BAREYOLO_HOST_DEVICE S min_of(const S& a, const S& b) {
  return value_of(b) < value_of(a) ? b : a;
}
template <class S>
BAREYOLO_HOST_DEVICE S max_of(const S& a, const S& b) {
  return value_of(b) > value_of(a) ? b : a;
}
template <class S>
BAREYOLO_HOST_DEVICE S clamp_min_zero(const S& a) {
  return value_of(a) < 0 ? S(0) : a;
}

struct Box {
  double cx, cy, w, h;
};

template <class S>
struct CiouTerms {
  S ciou;
  double alpha;  // the detached aspect-ratio weight
};

// CIoU of prediction (x, y, w, h) against `target`. When `fixed_alpha` is given (>= 0) it
// replaces alpha: finite-difference checks hold it at the value of the unperturbed point.
template <class S>
BAREYOLO_HOST_DEVICE CiouTerms<S> complete_iou(const S& x, const S& y, const S& w, const S& h,
                                               const Box& target, double fixed_alpha = -1) {
  constexpr double eps = 1e-7;
  const S half(0.5);
  const S b1x1 = x - w * half, b1x2 = x + w * half, b1y1 = y - h * half, b1y2 = y + h * half;
  const double b2x1 = target.cx - target.w / 2, b2x2 = target.cx + target.w / 2;
  const double b2y1 = target.cy - target.h / 2, b2y2 = target.cy + target.h / 2;

  const S inter = clamp_min_zero(min_of(b1x2, S(b2x2)) - max_of(b1x1, S(b2x1))) *
                  clamp_min_zero(min_of(b1y2, S(b2y2)) - max_of(b1y1, S(b2y1)));
  const S uni = w * h + S(target.w * target.h) - inter + S(eps);
  const S iou = inter / uni;
  const S cw = max_of(b1x2, S(b2x2)) - min_of(b1x1, S(b2x1));
  const S ch = max_of(b1y2, S(b2y2)) - min_of(b1y1, S(b2y1));
  const S c2 = cw * cw + ch * ch + S(eps);
  const S dx = S(b2x1 + b2x2) - b1x1 - b1x2, dy = S(b2y1 + b2y2) - b1y1 - b1y2;
  const S rho2 = (dx * dx + dy * dy) * S(0.25);
  const S angle = S(atan_of(target.w / target.h)) - atan_of(w / h);
  const S v = S(4 / (M_PI * M_PI)) * angle * angle;
  const double alpha =
      fixed_alpha >= 0 ? fixed_alpha : value_of(v) / (value_of(v) - value_of(iou) + (1 + eps));
  return {iou - (rho2 / c2 + v * S(alpha)), alpha};
}

}  // namespace bareyolo::models
