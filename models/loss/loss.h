// models/loss/loss.h — YOLOv5's training loss (utils/loss.py ComputeLoss), forward and backward.
//
// Per level i, over the rows matched by build_targets (n_i of them):
//   box  mean over rows of (1 - CIoU(pred, target)),  pred xy = 2 s(t_xy) - 0.5,
//        pred wh = (2 s(t_wh))^2 * anchor  (s = sigmoid)
//   cls  mean over rows x classes of BCE(logits, one-hot)           (only when nc > 1)
//   obj  balance_i * mean over all batch x anchors x cells of BCE(obj logit, tobj), where
//        tobj = max(CIoU, 0) at matched cells (detached; a later row overwrites), else 0
// where BCE is the focal loss of loss_terms.h when fl_gamma > 0 (hyp.scratch-*: 0)
// then box, obj, cls times their gains, and total = (box + obj + cls) * batch.
//
// The means divide by the counts in `LossNormalization`. With the local counts (the
// default) this is YOLOv5's loss exactly. Under data parallelism every rank passes the
// GLOBAL counts (matched rows per level and images, summed over ranks) so that its value is
// its share of the global-batch loss; docs/ddp.md derives the gradient scale that makes the
// ranks' averaged gradient equal the one-process gradient.
//
// The counts and the values live on the head's device: the training step must not make the
// host wait for the device, so the counts are summed over the ranks where they are (an
// all-reduce of device memory), the loss reads them there, and it writes its values into a
// small tensor there that the trainer reads one step later (LossReadback).
#pragma once

#include <string>
#include <vector>

#include "engine/tensor.h"
#include "kernels/staged_copies.h"
#include "kernels/view.h"
#include "models/loss/loss_rows.h"
#include "models/loss/loss_terms.h"  // defines: BceOptions

namespace bareyolo::models {

// hyp.scratch-low's loss entries.
struct LossHyp {
  double box = 0.05, obj = 1.0, cls = 0.5;
  double cls_pw = 1.0, obj_pw = 1.0;  // BCE pos_weight
  double anchor_t = 4.0;
  double label_smoothing = 0.0;
  double fl_gamma = 0.0;  // > 0: focal loss around the obj and cls BCE (loss_terms.h)

  BceOptions obj_bce() const { return {obj_pw, fl_gamma}; }
  BceOptions cls_bce() const { return {cls_pw, fl_gamma}; }
};

// The loss entries of a hyperparameter yaml (YOLOv5's hyp.*.yaml); other keys are ignored,
// missing ones keep hyp.scratch-low's values.
LossHyp load_loss_hyp(const std::string& path);

// The gains after train.py's scaling for nl levels, nc classes and image size:
// box *= 3 / nl, cls *= nc / 80 * 3 / nl, obj *= (imgsz / 640)^2 * 3 / nl.
LossHyp scale_loss_gains(LossHyp hyp, int levels, int classes, int image_size);

struct LossNormalization {
  // f64 (1, 1, 1, levels + 1) on the head's device: counts[i] = n_i, the matched rows of level
  // i that its box and class means divide by; counts[levels] = the images the obj means and
  // the total use.
  Tensor counts;
  // Multiplies every gradient (not the reported values): the world size under data
  // parallelism, so that averaging the ranks' gradients gives the global-batch gradient.
  double gradient_scale = 1;

  int64_t levels() const { return counts.numel() - 1; }
};

// The local normalisation: this batch's own counts (single-process YOLOv5), on `device`,
// written there without the host waiting for it (a GPU's through pinned memory).
LossNormalization local_normalization(const std::vector<std::vector<MatchedRow>>& targets,
                                      int images, const Device& device = Device::cpu());
// The same into `counts` (f64 (1, 1, 1, levels + 1)), which the caller keeps: the Solver's, one
// buffer at one address for every step.
LossNormalization local_normalization(const std::vector<std::vector<MatchedRow>>& targets,
                                      int images, Tensor counts);

struct LossValues {
  double box = 0, obj = 0, cls = 0;  // after the gains, as YOLOv5 reports them
  double total = 0;                  // (box + obj + cls) * images
};

// The loss's values on the device: f64 (1, 1, 1, kLossItems) = box, obj, cls, total.
inline constexpr int kLossItems = 4;

// A loss tensor's values on their way to the host: the copy is queued at construction, after
// the device's work that computes them, and read() waits for that work only. The trainer
// starts one as soon as it has queued a step and reads it after queuing the next, so that the
// device runs the next step while the host waits. Refuses a tensor that is not a loss tensor,
// naming its shape and dtype.
class LossReadback {
 public:
  explicit LossReadback(const Tensor& loss);
  LossValues read() const;

 private:
  StagedDownload download_;
};

// The values of a loss tensor, read on the host at once (waiting for the device's work that
// computes them): LossReadback(loss).read().
LossValues read_loss(const Tensor& loss);

// The reported values from the three sums of means (before the gains): the gains applied, and
// total = (box + obj + cls) x images, written to items[0 .. kLossItems). The one formula of
// the host loss and the GPU's.
BAREYOLO_HOST_DEVICE inline void write_loss_items(const LossHyp& hyp, double images, double box,
                                                  double obj, double cls, double* items) {
  items[0] = box * hyp.box;
  items[1] = obj * hyp.obj;
  items[2] = cls * hyp.cls;
  items[3] = (items[0] + items[1] + items[2]) * images;
}

// What YOLOv5 detaches, per level and matched row: CIoU's alpha, and the CIoU value used as
// the objectness target. Finite-difference checks fill it at the
// unperturbed point and pass it back so that the perturbed losses hold them fixed.
struct DetachedTerms {
  std::vector<std::vector<double>> alpha, iou;
  bool empty() const { return alpha.empty(); }
};

struct LossOptions {
  LossHyp hyp;  // already scaled (scale_loss_gains)
  int classes = 80;
  std::vector<double> balance = {4.0, 1.0, 0.4};  // per level; YOLOv5's for 3 levels
};

// What the op sequence (kernels/op_sequence.h) records of the loss's arguments: where its counts
// are, and every setting's exact value.
std::string describe_argument(const LossNormalization& norm);
std::string describe_argument(const LossOptions& options);

// One level's weights and gradient factors under YOLOv5's normalisation (docs/ddp.md, section
// 5), the gradients scaled to d total x norm.gradient_scale: written once for the host loss
// (loss.cpp) and the GPU's (head_loss.cuh), which computes them on the device from the counts
// there.
struct LevelFactors {
  double rows = 0;         // n_i, the level's matched rows: the box and class means' count
  double box_grad = 0;     // d total / d CIoU of one row
  double per_element = 0;  // a class term's weight in the class mean: 1 / (n_i classes)
  double cls_grad = 0;     // d total / d a class term's BCE
  double per_cell = 0;     // a cell's weight in the objectness mean, times the level's balance
  double obj_grad = 0;     // d total / d a cell's objectness BCE
};

// What a level's factors take besides the counts: plain numbers, which a kernel takes by value.
struct LevelWeights {
  double box_gain = 0, obj_gain = 0, cls_gain = 0;  // the hyp's, scaled
  double balance = 0;                               // the level's objectness balance
  double gradient_scale = 1;                        // LossNormalization's
  int classes = 0, anchors = 0, ny = 0, nx = 0;     // the level's head: anchors x ny x nx cells
};

inline LevelWeights level_weights(const LossOptions& options, double gradient_scale, size_t level,
                                  int anchors, int ny, int nx) {
  return {.box_gain = options.hyp.box,
          .obj_gain = options.hyp.obj,
          .cls_gain = options.hyp.cls,
          .balance = options.balance[level],
          .gradient_scale = gradient_scale,
          .classes = options.classes,
          .anchors = anchors,
          .ny = ny,
          .nx = nx};
}

// The factors of a level with `rows` matched rows in a batch of `images` (the counts).
BAREYOLO_HOST_DEVICE inline LevelFactors level_factors(const LevelWeights& w, double rows,
                                                       double images) {
  const double grad_scale = images * w.gradient_scale;  // total = sum x images
  LevelFactors f;
  f.rows = rows;
  f.box_grad = -w.box_gain / f.rows * grad_scale;
  f.per_element = 1.0 / (f.rows * w.classes);
  f.cls_grad = w.cls_gain * f.per_element * grad_scale;
  f.per_cell = w.balance / (images * w.anchors * w.ny * w.nx);
  f.obj_grad = w.obj_gain * f.per_cell * grad_scale;
  return f;
}

// Computes the loss of the head outputs `predictions` (one NCHW view per level, channel
// a * (nc + 5) + k) for the matched rows staged in `rows` into `values` (the kLossItems doubles
// of a loss tensor on their device: read_loss reads it) and, when `gradients` is not empty, ADDS
// d(total)/d(predictions) times norm.gradient_scale into it (same layout). norm.counts, `rows`
// and `values` must be on the predictions' device, `rows` staged for heads of their shapes.
// `detached`: null, or filled when empty, or used when filled.
template <class T>
void yolo_loss(const std::vector<View<const T>>& predictions, const LossRows& rows,
               const LossNormalization& norm, const LossOptions& options,
               const std::vector<View<T>>& gradients, const View<double>& values,
               DetachedTerms* detached = nullptr);

// The same for `targets` as build_targets made them: staged here on the predictions' device,
// into a new loss tensor.
template <class T>
Tensor yolo_loss(const std::vector<View<const T>>& predictions, const LevelTargets& targets,
                 const LossNormalization& norm, const LossOptions& options,
                 const std::vector<View<T>>& gradients, DetachedTerms* detached = nullptr);

// A new loss tensor on `device`, for yolo_loss to write.
Tensor empty_loss(const Device& device);

}  // namespace bareyolo::models

namespace bareyolo::cuda {

// models::yolo_loss for head outputs on one GPU (models/loss/head_loss.cu), where it routes a
// call whose views are on a device: the same values (into `values` on that GPU, the host waiting
// for nothing) and the same gradient ADDED into `gradients` (dense device views of the
// predictions' shapes, required), each element evaluated with the same double formulas
// (models/loss/loss_terms.h), reading the rows where `rows` staged them. `detached` must be null:
// holding terms fixed is a host-only aid of the finite-difference checks.
void yolo_loss(const std::vector<View<const float>>& predictions, const models::LossRows& rows,
               const models::LossNormalization& norm, const models::LossOptions& options,
               const std::vector<View<float>>& gradients, const View<double>& values,
               const models::DetachedTerms* detached);

}  // namespace bareyolo::cuda
