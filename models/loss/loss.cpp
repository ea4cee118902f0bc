// models/loss/loss.cpp — see loss.h. Host code in double precision, reading the head outputs
// where they are; the CIoU gradient comes exactly from Dual numbers (models/loss/ciou.h). The
// per-element math is models/loss/loss_terms.h, shared with the CUDA loss
// (models/loss/head_loss.cu), where views on a GPU route.
#include "models/loss/loss.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include <yaml-cpp/yaml.h>

#include "kernels/cpu/thread_pool.h"
#include "kernels/op_sequence.h"
#include "kernels/route.h"
#include "kernels/staged_copies.h"
#include "models/loss/loss_terms.h"

namespace bareyolo::models {

namespace {

// Reads and adds into the head output of one level at (image, anchor, field, gj, gi).
template <class V>
auto& at(const V& view, int outputs, int image, int anchor, int field, int gj, int gi) {
  return view.channel(image, anchor * outputs + field)[gj * view.shape.w + gi];
}

template <class T>
std::vector<Shape4> shapes_of(const std::vector<View<const T>>& views) {
  std::vector<Shape4> shapes;
  for (const View<const T>& v : views) shapes.push_back(v.shape);
  return shapes;
}

}  // namespace

LossHyp load_loss_hyp(const std::string& path) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::Exception& e) {
    throw std::invalid_argument(path + ": cannot read hyperparameters: " + e.what());
  }
  LossHyp hyp;
  const std::pair<const char*, double*> keys[] = {{"box", &hyp.box},
                                                  {"obj", &hyp.obj},
                                                  {"cls", &hyp.cls},
                                                  {"cls_pw", &hyp.cls_pw},
                                                  {"obj_pw", &hyp.obj_pw},
                                                  {"anchor_t", &hyp.anchor_t},
                                                  {"label_smoothing", &hyp.label_smoothing},
                                                  {"fl_gamma", &hyp.fl_gamma}};
  for (const auto& [key, value] : keys) {
    if (!root[key]) continue;
    try {
      *value = root[key].as<double>();
    } catch (const YAML::Exception&) {
      throw std::invalid_argument(path + ": '" + key + "' must be a number, got '" +
                                  YAML::Dump(root[key]) + "'");
    }
  }
  if (!(hyp.fl_gamma >= 0) || !std::isfinite(hyp.fl_gamma))
    throw std::invalid_argument(path + ": fl_gamma = " + std::to_string(hyp.fl_gamma) +
                                " must be a finite number >= 0 (0: no focal loss)");
  return hyp;
}

LossHyp scale_loss_gains(LossHyp hyp, int levels, int classes, int image_size) {
  hyp.box *= 3.0 / levels;
  hyp.cls *= classes / 80.0 * 3.0 / levels;
  hyp.obj *= (image_size / 640.0) * (image_size / 640.0) * 3.0 / levels;
  return hyp;
}

LossNormalization local_normalization(const std::vector<std::vector<MatchedRow>>& targets,
                                      int images, const Device& device) {
  return local_normalization(
      targets, images, Tensor::empty({1, 1, 1, int64_t(targets.size()) + 1}, device, DType::f64));
}

LossNormalization local_normalization(const std::vector<std::vector<MatchedRow>>& targets,
                                      int images, Tensor counts) {
  std::vector<double> values;
  for (const auto& rows : targets) values.push_back(static_cast<double>(rows.size()));
  values.push_back(images);
  if (counts.dtype() != DType::f64 || counts.numel() != int64_t(values.size()))
    throw std::invalid_argument("local_normalization: the counts of " +
                                std::to_string(targets.size()) + " levels take " +
                                std::to_string(values.size()) + " f64 values; got " +
                                counts.shape().str() + " " + dtype_name(counts.dtype()));
  upload_without_waiting(counts.view<double>().data, counts.device(), values.data(),
                         values.size() * sizeof(double));
  return {std::move(counts)};
}

std::string describe_argument(const LossNormalization& norm) {
  return "counts " + op_sequence::describe(norm.counts.view<double>()) + " gradient scale " +
         op_sequence::describe(norm.gradient_scale);
}

std::string describe_argument(const LossOptions& options) {
  const LossHyp& h = options.hyp;
  const std::vector<double> hyp = {
      h.box, h.obj, h.cls, h.cls_pw, h.obj_pw, h.anchor_t, h.label_smoothing, h.fl_gamma};
  return "hyp " + op_sequence::describe(hyp) + " classes " + std::to_string(options.classes) +
         " balance " + op_sequence::describe(options.balance);
}

namespace {
// `loss` itself, checked to be a loss tensor: kLossItems f64 values in one block.
const Tensor& checked_loss(const Tensor& loss) {
  if (loss.dtype() != DType::f64 || loss.numel() != kLossItems || !loss.dense())
    throw std::invalid_argument(std::string("read_loss: a loss tensor holds ") +
                                std::to_string(kLossItems) +
                                " f64 values (box, obj, cls, total); "
                                "got " +
                                loss.shape().str() + " " + dtype_name(loss.dtype()) +
                                " (pass what yolo_loss or head_loss returned)");
  return loss;
}
}  // namespace

LossReadback::LossReadback(const Tensor& loss)
    : download_(checked_loss(loss).view<double>().data, loss.device(),
                kLossItems * sizeof(double)) {}

LossValues LossReadback::read() const {
  double items[kLossItems];
  download_.read(items);
  return {.box = items[0], .obj = items[1], .cls = items[2], .total = items[3]};
}

LossValues read_loss(const Tensor& loss) { return LossReadback(loss).read(); }

Tensor empty_loss(const Device& device) {
  return Tensor::empty({1, 1, 1, kLossItems}, device, DType::f64);
}

template <class T>
Tensor yolo_loss(const std::vector<View<const T>>& predictions, const LevelTargets& targets,
                 const LossNormalization& norm, const LossOptions& options,
                 const std::vector<View<T>>& gradients, DetachedTerms* detached) {
  const Device device = predictions.empty() ? Device::cpu() : predictions[0].device;
  LossRows rows(device);
  rows.stage(targets, head_cells(shapes_of(predictions), options.classes));
  Tensor loss = empty_loss(device);
  yolo_loss<T>(predictions, rows, norm, options, gradients, loss.view<double>(), detached);
  return loss;
}

template <class T>
void yolo_loss(const std::vector<View<const T>>& predictions, const LossRows& rows,
               const LossNormalization& norm, const LossOptions& options,
               const std::vector<View<T>>& gradients, const View<double>& values,
               DetachedTerms* detached) {
  const size_t levels = predictions.size();
  const int nc = options.classes, outputs = nc + 5;
  if (norm.levels() != int64_t(levels) || options.balance.size() < levels ||
      (!gradients.empty() && gradients.size() != levels))
    throw std::invalid_argument("yolo_loss: " + std::to_string(levels) +
                                " prediction levels but counts, balance or gradients "
                                "for a different number");
  const std::vector<Shape4> shapes = shapes_of(predictions);
  if (rows.cells() != head_cells(shapes, nc))
    throw std::invalid_argument("yolo_loss: the rows were staged for another head than this one (" +
                                std::to_string(levels) + " levels, the first " +
                                (levels > 0 ? shapes[0].str() : std::string("-")) +
                                "); stage them for the head they are the targets of");
  const Device device = levels > 0 ? predictions[0].device : Device::cpu();
  if (!(norm.counts.device() == device) || norm.counts.dtype() != DType::f64)
    throw std::invalid_argument(
        "yolo_loss: the counts are " + std::string(dtype_name(norm.counts.dtype())) + " on " +
        norm.counts.device().str() + "; the head is on " + device.str() +
        " (make them with local_normalization(..., " + "the head's device), in f64)");
  if (!(rows.device() == device))
    throw std::invalid_argument("yolo_loss: the rows were staged on " + rows.device().str() +
                                ", the head is on " + device.str() +
                                "; stage them on the head's device");
  if (!(values.device == device) || values.shape.numel() != kLossItems)
    throw std::invalid_argument("yolo_loss: the values go into " + values.shape.str() + " on " +
                                values.device.str() + "; give a loss tensor (empty_loss) on " +
                                device.str());
  BAREYOLO_ROUTE_TO_CUDA(yolo_loss, device, predictions, rows, norm, options, gradients, values,
                         detached);
  const LevelTargets& targets = rows.targets();
  const bool use_detached = detached && !detached->empty();
  if (detached && !use_detached) {
    detached->alpha.assign(levels, {});
    detached->iou.assign(levels, {});
  }
  const double positive = 1 - 0.5 * options.hyp.label_smoothing;  // YOLOv5's cp and cn
  const double negative = 0.5 * options.hyp.label_smoothing;
  const BceOptions obj_bce = options.hyp.obj_bce(), cls_bce = options.hyp.cls_bce();
  const double* counts = norm.counts.view<double>().data;  // host memory: the CPU's device
  const double images = counts[levels];
  double box = 0, obj = 0, cls = 0;
  for (size_t level = 0; level < levels; ++level) {
    const View<const T>& p = predictions[level];
    const int anchors = static_cast<int>(p.shape.c / outputs);
    const int ny = static_cast<int>(p.shape.h), nx = static_cast<int>(p.shape.w);
    const std::vector<MatchedRow>& rows = targets[level];
    const LevelFactors factors = level_factors(
        level_weights(options, norm.gradient_scale, level, anchors, ny, nx), counts[level], images);
    // Objectness targets of the matched cells, written in row order (the last row wins).
    std::vector<double> tobj(static_cast<size_t>(p.shape.n * anchors * ny * nx), 0.0);
    auto cell = [&](const MatchedRow& r) {
      return static_cast<size_t>(((r.image * anchors + r.anchor) * ny + r.gj) * nx + r.gi);
    };

    for (size_t k = 0; k < rows.size(); ++k) {
      const MatchedRow& r = rows[k];
      double logit[4];
      for (int f = 0; f < 4; ++f) logit[f] = at(p, outputs, r.image, r.anchor, f, r.gj, r.gi);
      const double fixed_alpha = use_detached ? detached->alpha[level][k] : -1;
      const RowBox terms =
          row_box(logit, {r.tx, r.ty, r.tw, r.th}, r.anchor_w, r.anchor_h, fixed_alpha);
      // The objectness target is the CIoU itself, detached.
      const double ciou_target = use_detached ? detached->iou[level][k] : terms.ciou;
      if (detached && !use_detached) {
        detached->alpha[level].push_back(terms.alpha);
        detached->iou[level].push_back(terms.ciou);
      }
      box += (1 - terms.ciou) / factors.rows;
      tobj[cell(r)] = std::max(ciou_target, 0.0);
      if (!gradients.empty()) {
        for (int k = 0; k < 4; ++k)
          at(gradients[level], outputs, r.image, r.anchor, k, r.gj, r.gi) +=
              static_cast<T>(factors.box_grad * terms.dciou[k] * terms.dcoord[k]);
      }
      if (nc > 1) {
        for (int c = 0; c < nc; ++c) {
          const double t = c == r.class_id ? positive : negative;
          const double logit_c = at(p, outputs, r.image, r.anchor, 5 + c, r.gj, r.gi);
          cls += loss_bce(logit_c, t, cls_bce) * factors.per_element;
          if (!gradients.empty())
            at(gradients[level], outputs, r.image, r.anchor, 5 + c, r.gj, r.gi) +=
                static_cast<T>(factors.cls_grad * loss_bce_grad(logit_c, t, cls_bce));
        }
      }
    }

    // Objectness over every cell, the bulk of the loss's time (a log and two exps per cell,
    // ~100k cells for 16 images at 320 px): on the pool, one (image, anchor) plane per task.
    // Each plane's sum is kept apart and the sums added in plane order, so the bits do not
    // depend on the thread count.
    std::vector<double> plane_obj(static_cast<size_t>(p.shape.n * anchors));
    parallel_for(p.shape.n * anchors, 1, [&](int64_t first, int64_t last) {
      for (int64_t plane = first; plane < last; ++plane) {
        const int image = static_cast<int>(plane / anchors), a = static_cast<int>(plane % anchors);
        const double* plane_tobj = tobj.data() + plane * ny * nx;
        double sum = 0;
        for (int gj = 0; gj < ny; ++gj)
          for (int gi = 0; gi < nx; ++gi) {
            const double t = plane_tobj[gj * nx + gi];
            const double logit = at(p, outputs, image, a, 4, gj, gi);
            sum += loss_bce(logit, t, obj_bce) * factors.per_cell;
            if (!gradients.empty())
              at(gradients[level], outputs, image, a, 4, gj, gi) +=
                  static_cast<T>(factors.obj_grad * loss_bce_grad(logit, t, obj_bce));
          }
        plane_obj[static_cast<size_t>(plane)] = sum;
      }
    });
    for (double sum : plane_obj) obj += sum;
  }

  write_loss_items(options.hyp, images, box, obj, cls, values.data);
}

template void yolo_loss<float>(const std::vector<View<const float>>&, const LossRows&,
                               const LossNormalization&, const LossOptions&,
                               const std::vector<View<float>>&, const View<double>&,
                               DetachedTerms*);
template void yolo_loss<double>(const std::vector<View<const double>>&, const LossRows&,
                                const LossNormalization&, const LossOptions&,
                                const std::vector<View<double>>&, const View<double>&,
                                DetachedTerms*);
template Tensor yolo_loss<float>(const std::vector<View<const float>>&, const LevelTargets&,
                                 const LossNormalization&, const LossOptions&,
                                 const std::vector<View<float>>&, DetachedTerms*);
template Tensor yolo_loss<double>(const std::vector<View<const double>>&, const LevelTargets&,
                                  const LossNormalization&, const LossOptions&,
                                  const std::vector<View<double>>&, DetachedTerms*);

}  // namespace bareyolo::models
