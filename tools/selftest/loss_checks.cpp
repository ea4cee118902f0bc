// tools/selftest/loss_checks.cpp — YOLOv5's loss on the DUT against the host's loss in double
// (see selftest.h; tolerances: the top of selftest.cpp): yolo_loss<float> of random heads and
// random matched rows (several rows on one cell, whose objectness target the last one sets; an
// empty level; label smoothing and pos_weights; this batch's counts and data parallelism's global
// ones; the focal loss of fl_gamma), and head_loss of build_targets' rows and of the tiny model's
// targets. A GPU head routes to cuda::yolo_loss: only the matched rows go up, and the values stay
// in a loss tensor on the GPU until read_loss reads them. The values and the gradients are separate
// checks: every term of the values is a double on both sides, while each gradient element is a
// double rounded to float.
#include <utility>
#include <vector>

#include "models/loss/head_loss.h"
#include "models/loss/loss_targets.h"
#include "tools/selftest/checks.h"
#include "tools/selftest/random_matched_rows.h"

namespace bareyolo::selftest {

using namespace bareyolo::models;  // the loss under check

namespace {

// A loss case's errors: its four values (box, obj, cls, total), its gradients.
struct LossErrors {
  double values = 0, gradients = 0;
};
LossErrors worse(LossErrors a, LossErrors b) {
  return {std::max(a.values, b.values), std::max(a.gradients, b.gradients)};
}

// A loss tensor's values (read_loss), in one vector.
std::vector<double> loss_values(const Tensor& loss) {
  const LossValues v = read_loss(loss);
  return {v.box, v.obj, v.cls, v.total};
}

// `norm` with its counts on `device`, where a loss of a head there reads them.
LossNormalization counts_on(const Device& device, const LossNormalization& norm) {
  return {norm.counts.on(device), norm.gradient_scale};
}

std::vector<Tensor> in_doubles(const std::vector<Tensor>& tensors) {
  std::vector<Tensor> doubles;
  for (const Tensor& t : tensors) doubles.push_back(in_double(t));
  return doubles;
}

// ---- yolo_loss of random matched rows ----------------------------------------------------------

// Cells named by more than one row, over all levels.
int shared_cells(const LevelTargets& targets) {
  int shared = 0;
  for (const auto& rows : targets)
    for (size_t k = 0; k < rows.size(); ++k)
      for (size_t j = 0; j < k; ++j)
        if (rows[j].image == rows[k].image && rows[j].anchor == rows[k].anchor &&
            rows[j].gj == rows[k].gj && rows[j].gi == rows[k].gi) {
          ++shared;
          break;
        }
  return shared;
}

// yolo_loss of `head` on the DUT in float and on the host in double, both adding into the same
// initial gradients.
template <class T>
Tensor yolo_loss_on(const std::vector<Tensor>& head, std::vector<Tensor>& gradients,
                    const LevelTargets& targets, const LossNormalization& norm,
                    const LossOptions& options) {
  std::vector<View<const T>> views;
  std::vector<View<T>> gradient_views;
  for (size_t level = 0; level < head.size(); ++level) {
    views.push_back(head[level].view<T>());
    gradient_views.push_back(gradients[level].view<T>());
  }
  return yolo_loss<T>(views, targets, counts_on(head.at(0).device(), norm), options,
                      gradient_views);
}

LossErrors yolo_loss_case(const Device& dut, const std::vector<Tensor>& head,
                          const LevelTargets& targets, const LossNormalization& norm,
                          const LossOptions& options, Random& random) {
  std::vector<Tensor> gradients;
  for (const Tensor& h : head) gradients.push_back(random.uniform(h.shape(), -1, 1));
  std::vector<Tensor> got_gradients = on_device(gradients, dut),
                      want_gradients = in_doubles(gradients);
  const Tensor got =
      yolo_loss_on<float>(on_device(head, dut), got_gradients, targets, norm, options);
  const Tensor want =
      yolo_loss_on<double>(in_doubles(head), want_gradients, targets, norm, options);
  LossErrors errors{max_error(loss_values(got), loss_values(want))};
  for (size_t level = 0; level < head.size(); ++level)
    errors.gradients = std::max(errors.gradients, max_error(got_gradients[level].to_doubles(),
                                                            want_gradients[level].to_doubles()));
  return errors;
}

// 1 and 4 classes; three images on levels of 8x8, 4x4 and 2x2 cells, the last matching nothing.
LossErrors yolo_loss_errors(const Device& dut) {
  LossErrors errors;
  for (int classes : {1, 4}) {
    Random random(74 + uint64_t(classes));
    const int images = 3, anchors = 3, outputs = classes + 5;
    const int sizes[] = {8, 4, 2};
    std::vector<Tensor> head;
    LevelTargets targets;
    for (int level = 0; level < 3; ++level) {
      head.push_back(
          random.uniform({images, anchors * outputs, sizes[level], sizes[level]}, -4, 4));
      targets.push_back(level == 2
                            ? std::vector<MatchedRow>{}
                            : random_matched_rows(random.engine(), level == 0 ? 60 : 25, images,
                                                  anchors, sizes[level], sizes[level], classes));
    }
    if (shared_cells(targets) < 10)
      throw std::logic_error("the random rows share " + std::to_string(shared_cells(targets)) +
                             " cells: too few to check that the last row's target wins");
    LossOptions options{scale_loss_gains({}, 3, classes, 320), classes};
    options.hyp.label_smoothing = 0.1;
    options.hyp.cls_pw = 1.3;
    options.hyp.obj_pw = 0.8;
    LossNormalization norm = local_normalization(targets, images);
    errors = worse(errors, yolo_loss_case(dut, head, targets, norm, options, random));
    // Data parallelism's form: global counts larger than the local ones, scaled gradients.
    norm = {Tensor::from_vector<double>({150, 70, 12, 8}, {1, 1, 1, 4}), 4};
    errors = worse(errors, yolo_loss_case(dut, head, targets, norm, options, random));
    // YOLOv5's focal loss (hyp fl_gamma > 0) around the objectness and class BCE.
    options.hyp.fl_gamma = 1.5;
    errors = worse(errors, yolo_loss_case(dut, head, targets, norm, options, random));
  }
  return errors;
}

// ---- head_loss
// -----------------------------------------------------------------------------------

// head_loss of `head` on the DUT and in double on the host; its gradients must be on the DUT.
LossErrors head_loss_case(const Device& dut, const std::vector<Tensor>& head,
                          const LevelTargets& targets, const LossNormalization& norm,
                          const LossOptions& options) {
  const HeadLoss got = head_loss(on_device(head, dut), targets, counts_on(dut, norm), options);
  const HeadLoss want = head_loss(in_doubles(head), targets, norm, options);
  LossErrors errors{max_error(loss_values(got.loss), loss_values(want.loss))};
  for (size_t level = 0; level < head.size(); ++level) {
    if (got.gradients.at(level).device() != dut)
      throw std::runtime_error("head_loss of a head on " + dut.str() + " left the gradient of " +
                               "level " + std::to_string(level) + " on " +
                               got.gradients[level].device().str());
    errors.gradients = std::max(errors.gradients, max_error(got.gradients[level].to_doubles(),
                                                            want.gradients[level].to_doubles()));
  }
  return errors;
}

// build_targets' rows of 40 labels over 4 images and 5 classes on levels of 16x16, 8x8 and 4x4
// cells; and the tiny model's head_targets of 24 labels on its head for 4 images.
LossErrors head_loss_errors(const Device& dut) {
  Random random(78);
  const int images = 4, classes = 5, outputs = classes + 5;
  std::vector<LabelRow> labels;
  for (int k = 0; k < 40; ++k) {
    const std::vector<double> u = random.values(4, 0, 1);
    labels.push_back({random.integer(0, images - 1), random.integer(0, classes - 1),
                      float(0.05 + 0.9 * u[0]), float(0.05 + 0.9 * u[1]), float(0.02 + 0.4 * u[2]),
                      float(0.02 + 0.4 * u[3])});
  }
  std::vector<LevelGrid> grids;
  std::vector<Tensor> head;
  for (int size : {16, 8, 4}) {
    LevelGrid grid{size, size, {}};
    for (int a = 0; a < 3; ++a)
      grid.anchors.push_back({0.5 + 1.5 * a * 16 / size, 0.8 + a * 16.0 / size});
    grids.push_back(grid);
    head.push_back(random.uniform({images, 3 * outputs, size, size}, -3, 3));
  }
  const LevelTargets targets = build_targets(labels, grids, 4.0);
  if (targets[0].empty()) throw std::logic_error("build_targets matched nothing on level 0");
  const LossOptions options{scale_loss_gains({}, 3, classes, 128), classes};
  const LossErrors built =
      head_loss_case(dut, head, targets, local_normalization(targets, images), options);

  const DetectionModel tiny(tiny_config(), {.nc = kTinyClasses});
  Random tiny_random(70);
  const int tiny_images = 4;
  const std::vector<Tensor> tiny_head = random_head(tiny, tiny_random, tiny_images, -4, 4);
  const LossOptions tiny_options = tiny_loss_options();
  const LevelTargets tiny_targets =
      head_targets(tiny, tiny_head, random_labels(tiny_random, tiny_images, 24), tiny_options);
  return worse(built, head_loss_case(dut, tiny_head, tiny_targets,
                                     local_normalization(tiny_targets, tiny_images), tiny_options));
}

}  // namespace

std::vector<Check> loss_checks() {
  return {
      {"loss", "yolo_loss values (random rows)", kDoubleLoss,
       [](const Device& dut) { return yolo_loss_errors(dut).values; }},
      {"loss", "yolo_loss gradients (random rows)", kTranscendental,
       [](const Device& dut) { return yolo_loss_errors(dut).gradients; }},
      {"loss", "head_loss values", kDoubleLoss,
       [](const Device& dut) { return head_loss_errors(dut).values; }},
      {"loss", "head_loss gradients", kTranscendental,
       [](const Device& dut) { return head_loss_errors(dut).gradients; }},
  };
}

}  // namespace bareyolo::selftest
