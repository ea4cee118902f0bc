// tests/unit/loss.cpp — YOLOv5's loss: target building by hand-worked cases, CIoU by its
// definition, the loss gradient against finite differences (with YOLOv5's detached terms
// held fixed; plain and focal), the focal terms against YOLOv5's FocalLoss, the normalisation that
// lets a batch split over ranks add up exactly, the same bits for any thread count, and the loss
// tensor's values against the same formulas summed on the host.
#include <cmath>

#include "engine/safetensors.h"
#include "engine/shipped_files.h"
#include "models/loss/ciou.h"
#include "models/loss/loss.h"
#include "tests/support/testing.h"

using namespace bareyolo;
using namespace bareyolo::models;
using namespace bareyolo::testing;

namespace {

const std::vector<std::array<double, 2>> kAnchors = {{1.25, 1.625}, {2.0, 3.75}, {4.125, 2.875}};

std::vector<LabelRow> random_labels(Rng& rng, int images, int count, int classes) {
  std::vector<LabelRow> labels;
  std::uniform_real_distribution<float> centre(0.05f, 0.95f), size(0.05f, 0.5f);
  for (int k = 0; k < count; ++k)
    labels.push_back({random_int(rng, 0, images - 1), random_int(rng, 0, classes - 1), centre(rng),
                      centre(rng), size(rng), size(rng)});
  return labels;
}

std::vector<LevelGrid> grids(int size) {  // three levels of strides 8, 16, 32
  return {{size / 8, size / 8, kAnchors},
          {size / 16, size / 16, kAnchors},
          {size / 32, size / 32, kAnchors}};
}

// Raw head outputs for `levels` drawn in [-4, 4], and views of them.
struct RandomHeads {
  std::vector<std::vector<float>> values;
  std::vector<View<const float>> views;
};
RandomHeads random_heads(Rng& rng, int images, int outputs, const std::vector<LevelGrid>& levels) {
  RandomHeads heads;
  heads.values.resize(levels.size());
  for (size_t l = 0; l < levels.size(); ++l) {
    const Shape4 shape{images, int64_t(levels[l].anchors.size()) * outputs, levels[l].ny,
                       levels[l].nx};
    heads.values[l] = convert<float>(random_vector(rng, shape.numel(), -4, 4));
    heads.views.push_back(dense_view<const float>(heads.values[l].data(), shape));
  }
  return heads;
}

}  // namespace

TEST_CASE("build_targets matches anchors by ratio and adds the two nearer neighbour cells") {
  // One level, 10x10 grid. Label centre (2.3, 5.8) cells, size 2x3 cells.
  LevelGrid grid{10, 10, kAnchors};
  LabelRow label{1, 3, 0.23f, 0.58f, 0.2f, 0.3f};
  auto rows = build_targets({label}, {grid}, 4.0)[0];
  // Ratios to the anchors: (1.6, 1.85), (1, 0.8), (0.48, 1.04): all below 4, all match.
  // frac(gx) = 0.3 < 0.5 and gx > 1: left neighbour; frac(gy) = 0.8: no up; far edges:
  // 10 - 2.3 = 7.7 (frac 0.7: no right), 10 - 5.8 = 4.2 (frac 0.2: down neighbour).
  REQUIRE(rows.size() == 9);
  for (int a = 0; a < 3; ++a) {
    CHECK(rows[size_t(a)].anchor == a);
    CHECK(rows[size_t(a)].gi == 2);
    CHECK(rows[size_t(a)].gj == 5);
    CHECK(rows[size_t(3 + a)].gi == 1);  // left: the cell to the left
    CHECK(rows[size_t(3 + a)].gj == 5);
    CHECK(rows[size_t(6 + a)].gi == 2);  // down: the cell below
    CHECK(rows[size_t(6 + a)].gj == 6);
  }
  CHECK(rows[3].tx == doctest::Approx(1.3).epsilon(1e-6));  // offset from the left cell
  CHECK(rows[6].ty == doctest::Approx(-0.2).scale(0).epsilon(1e-5));
  CHECK(rows[0].tw == doctest::Approx(2.0).epsilon(1e-6));
  CHECK(rows[0].image == 1);
  CHECK(rows[0].class_id == 3);
}

TEST_CASE("build_targets rejects anchors at ratio 4 and keeps cells inside the grid") {
  LevelGrid grid{4, 4, {{1.0, 1.0}}};
  // w = 4 cells exactly: ratio 4 is not below anchor_t = 4.
  CHECK(build_targets({{0, 0, 0.5f, 0.5f, 1.0f, 0.25f}}, {grid}, 4.0)[0].empty());
  // Centre on the bottom-right edge: the cell is clamped to (3, 3) and tbox uses it.
  auto rows = build_targets({{0, 0, 1.0f, 1.0f, 0.25f, 0.25f}}, {grid}, 4.0)[0];
  REQUIRE(!rows.empty());
  CHECK(rows[0].gi == 3);
  CHECK(rows[0].gj == 3);
  CHECK(rows[0].tx == doctest::Approx(1.0));
  // A centre in the first cell (gx <= 1) gets no left or up neighbour.
  auto corner = build_targets({{0, 0, 0.1f, 0.1f, 0.25f, 0.25f}}, {grid}, 4.0)[0];
  CHECK(corner.size() == 1);
}

TEST_CASE("build_targets: x in the grid's width, y in its height, no neighbour at half a cell") {
  // A 10 wide, 5 high grid; centre (0.25, 0.5): gx = 2.5, gy = 2.5, each exactly half a cell
  // from both neighbours, so neither is added (YOLOv5 takes one below half, strictly).
  const LevelGrid grid{5, 10, {{1.0, 1.0}}};
  const std::vector<MatchedRow> rows =
      build_targets({{0, 0, 0.25f, 0.5f, 0.2f, 0.2f}}, {grid}, 4.0)[0];
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].gi == 2);
  CHECK(rows[0].gj == 2);
  CHECK(rows[0].tx == 0.5);
  CHECK(rows[0].ty == 0.5);
  CHECK(rows[0].tw == doctest::Approx(2.0).scale(0).epsilon(1e-6));  // 0.2 of 10 cells
  CHECK(rows[0].th == doctest::Approx(1.0).scale(0).epsilon(1e-6));  // 0.2 of 5 cells
}

TEST_CASE("complete_iou follows its definition and its Dual derivatives are exact") {
  const Box target{2.0, 3.0, 1.5, 2.5};
  // Identical boxes: IoU 1, no centre distance, no aspect difference -> CIoU ~ 1.
  CHECK(complete_iou(2.0, 3.0, 1.5, 2.5, target).ciou == doctest::Approx(1.0).epsilon(1e-6));
  // A worked case: pred (2.5, 3, 1, 2.2) against target x in [1.25, 2.75], y in [1.75, 4.25].
  // (No coordinate ties with the target: there min/max have a kink finite differences see.)
  const double x = 2.5, y = 3.0, w = 1.0, h = 2.2;
  const double inter = (2.75 - 2.0) * (4.1 - 1.9);
  const double iou = inter / (w * h + 1.5 * 2.5 - inter + 1e-7);
  const double c2 = std::pow(3.0 - 1.25, 2) + std::pow(4.25 - 1.75, 2) + 1e-7;
  const double rho2 = 0.25;  // centres 0.5 apart in x
  const double v = 4 / (M_PI * M_PI) * std::pow(std::atan(1.5 / 2.5) - std::atan(w / h), 2);
  const double alpha = v / (v - iou + 1 + 1e-7);
  CHECK(complete_iou(x, y, w, h, target).ciou ==
        doctest::Approx(iou - (rho2 / c2 + v * alpha)).epsilon(1e-12));
  // Boxes apart in x and in y: no intersection (the two negative overlaps multiplied would
  // make one), only the penalty. Target corner (2.75, 4.25); pred x in [3, 4], y in [4.5, 5.5].
  const double apart_c2 = std::pow(4.0 - 1.25, 2) + std::pow(5.5 - 1.75, 2) + 1e-7;
  const double apart_rho2 = std::pow(3.5 - 2.0, 2) + std::pow(5.0 - 3.0, 2);
  const double apart_v =
      4 / (M_PI * M_PI) * std::pow(std::atan(1.5 / 2.5) - std::atan(1.0 / 1.0), 2);
  const double apart_alpha = apart_v / (apart_v + 1 + 1e-7);
  CHECK(complete_iou(3.5, 5.0, 1.0, 1.0, target).ciou ==
        doctest::Approx(-(apart_rho2 / apart_c2 + apart_v * apart_alpha)).epsilon(1e-12));
  // Derivatives against central differences with alpha held fixed.
  const auto terms = complete_iou(Dual<4>::variable(x, 0), Dual<4>::variable(y, 1),
                                  Dual<4>::variable(w, 2), Dual<4>::variable(h, 3), target);
  double point[4] = {x, y, w, h};
  for (int k = 0; k < 4; ++k) {
    double plus[4], minus[4];
    std::copy(point, point + 4, plus);
    std::copy(point, point + 4, minus);
    plus[k] += 1e-6;
    minus[k] -= 1e-6;
    double numeric =
        (complete_iou(plus[0], plus[1], plus[2], plus[3], target, terms.alpha).ciou -
         complete_iou(minus[0], minus[1], minus[2], minus[3], target, terms.alpha).ciou) /
        2e-6;
    CAPTURE(k);
    CHECK(terms.ciou.d[size_t(k)] == doctest::Approx(numeric).epsilon(1e-6));
  }
}

TEST_CASE("loss gains scale with levels classes and image size as train.py does") {
  LossHyp scaled = scale_loss_gains({}, 3, 4, 320);
  CHECK(scaled.box == doctest::Approx(0.05));
  CHECK(scaled.cls == doctest::Approx(0.5 * 4 / 80));
  CHECK(scaled.obj == doctest::Approx(0.25));
}

namespace {

// The gradient of the whole loss (fl_gamma > 0: focal obj and cls terms) against finite
// differences of its value, in double.
void check_loss_gradient(double fl_gamma) {
  Rng rng(101);
  const int images = 2, classes = 3, size = 64, outputs = classes + 5;
  const std::vector<LevelGrid> levels = grids(size);
  const auto targets = build_targets(random_labels(rng, images, 5, classes), levels, 4.0);
  std::vector<std::vector<double>> values;
  std::vector<Shape4> shapes;
  for (const LevelGrid& g : levels) {
    shapes.push_back({images, 3 * outputs, g.ny, g.nx});
    values.push_back(random_vector(rng, shapes.back().numel(), -2, 2));
  }
  LossOptions options{scale_loss_gains({}, 3, classes, size), classes};
  options.hyp.label_smoothing = 0.1;  // exercise both target values
  options.hyp.obj_pw = 1.5;
  options.hyp.fl_gamma = fl_gamma;
  const LossNormalization norm = local_normalization(targets, images);
  auto views = [&] {
    std::vector<View<const double>> v;
    for (size_t l = 0; l < values.size(); ++l)
      v.push_back(dense_view<const double>(values[l].data(), shapes[l]));
    return v;
  };
  DetachedTerms detached;
  yolo_loss<double>(views(), targets, norm, options, {}, &detached);
  REQUIRE(!detached.alpha[0].empty());

  GradCheck check;
  for (auto& v : values) check.inputs.push_back(&v);
  check.names = {"p3", "p4", "p5"};
  check.forward = [&] {
    return std::vector<double>{
        read_loss(yolo_loss<double>(views(), targets, norm, options, {}, &detached)).total};
  };
  check.backward = [&](const std::vector<double>& dout, std::vector<std::vector<double>>& d) {
    std::vector<double> grads_scaled;
    std::vector<std::vector<double>> g(3);
    std::vector<View<double>> grad_views;
    for (size_t l = 0; l < 3; ++l) {
      g[l].assign(values[l].size(), 0.0);
      grad_views.push_back(dense_view(g[l].data(), shapes[l]));
    }
    yolo_loss<double>(views(), targets, norm, options, grad_views, &detached);
    for (size_t l = 0; l < 3; ++l)
      for (size_t i = 0; i < g[l].size(); ++i) d[l][i] += dout[0] * g[l][i];
  };
  check.max_checks_per_input = 400;
  check.tolerance = 1e-8;  // the loss gradients are small (means over many cells)
  check.run(rng);
}

}  // namespace

TEST_CASE("loss backward matches finite differences with detached terms held") {
  check_loss_gradient(0.0);
}

TEST_CASE("focal loss backward matches finite differences (fl_gamma 1.5 and 0.5)") {
  check_loss_gradient(1.5);
  check_loss_gradient(0.5);
}

TEST_CASE("the focal BCE terms are YOLOv5's FocalLoss, and fl_gamma 0 the plain BCE's bits") {
  // tests/fixtures/focal: PyTorch evaluating YOLOv5's FocalLoss and its autograd derivative.
  const SafetensorsFile fixture =
      SafetensorsFile::load(shipped_file("tests/fixtures/focal/focal_loss.safetensors"));
  const std::vector<double> logit = fixture.values<double>("logit"),
                            target = fixture.values<double>("target"),
                            pos_weight = fixture.values<double>("pos_weight"),
                            gamma = fixture.values<double>("gamma"),
                            loss = fixture.values<double>("loss"),
                            grad = fixture.values<double>("grad");
  REQUIRE(logit.size() == 240);
  double worst_loss = 0, worst_grad = 0;
  for (size_t i = 0; i < logit.size(); ++i) {
    const BceOptions focal{pos_weight[i], gamma[i]};
    const double got = loss_bce(logit[i], target[i], focal);
    const double got_grad = loss_bce_grad(logit[i], target[i], focal);
    worst_loss =
        std::max(worst_loss, std::fabs(got - loss[i]) / std::max(std::fabs(loss[i]), 1e-12));
    worst_grad =
        std::max(worst_grad, std::fabs(got_grad - grad[i]) / std::max(std::fabs(grad[i]), 1e-12));
    // gamma 0: the plain BCE, the same expression as without focal loss.
    const BceOptions plain{pos_weight[i], 0.0};
    CHECK(loss_bce(logit[i], target[i], plain) == bce(logit[i], target[i], pos_weight[i]));
    CHECK(loss_bce_grad(logit[i], target[i], plain) ==
          bce_grad(logit[i], target[i], pos_weight[i]));
  }
  MESSAGE("largest relative difference from YOLOv5's FocalLoss: " << worst_loss << " (loss), "
                                                                  << worst_grad << " (gradient)");
  CHECK(worst_loss < 1e-11);  // measured 3.5e-13: 1 - p_t is formed differently
  CHECK(worst_grad < 1e-10);
}

// The wiring: with fl_gamma, yolo_loss's obj and cls values are the focal terms of every
// cell against its objectness target and of every matched row's classes, under the usual
// means, gains and balance.
TEST_CASE("focal loss applies to both the objectness and the class terms") {
  Rng rng(105);
  const int images = 2, classes = 3, size = 64, outputs = classes + 5, anchors = 3;
  const std::vector<LevelGrid> levels = grids(size);
  const auto targets = build_targets(random_labels(rng, images, 6, classes), levels, 4.0);
  std::vector<std::vector<double>> values;
  std::vector<Shape4> shapes;
  std::vector<View<const double>> views;
  for (const LevelGrid& g : levels) {
    shapes.push_back({images, anchors * outputs, g.ny, g.nx});
    values.push_back(random_vector(rng, shapes.back().numel(), -4, 4));
    views.push_back(dense_view<const double>(values.back().data(), shapes.back()));
  }
  LossOptions options{scale_loss_gains({}, 3, classes, size), classes};
  options.hyp.label_smoothing = 0.1;
  options.hyp.cls_pw = 1.2;
  options.hyp.obj_pw = 1.5;
  options.hyp.fl_gamma = 1.5;
  const LossNormalization norm = local_normalization(targets, images);
  DetachedTerms detached;
  const LossValues focal =
      read_loss(yolo_loss<double>(views, targets, norm, options, {}, &detached));

  const BceOptions obj_bce{1.5, 1.5}, cls_bce{1.2, 1.5};
  double obj = 0, cls = 0;
  for (size_t l = 0; l < levels.size(); ++l) {
    const View<const double>& p = views[l];
    const int ny = levels[l].ny, nx = levels[l].nx;
    auto logit = [&](int image, int anchor, int field, int gj, int gi) {
      return p.channel(image, anchor * outputs + field)[gj * nx + gi];
    };
    std::vector<double> tobj(size_t(images * anchors * ny * nx), 0.0);
    for (size_t k = 0; k < targets[l].size(); ++k) {
      const MatchedRow& r = targets[l][k];
      tobj[size_t(((r.image * anchors + r.anchor) * ny + r.gj) * nx + r.gi)] =
          std::max(detached.iou[l][k], 0.0);
      for (int c = 0; c < classes; ++c)
        cls += loss_bce(logit(r.image, r.anchor, 5 + c, r.gj, r.gi), c == r.class_id ? 0.95 : 0.05,
                        cls_bce) /
               (double(targets[l].size()) * classes);
    }
    double level_obj = 0;
    for (int image = 0; image < images; ++image)
      for (int a = 0; a < anchors; ++a)
        for (int gj = 0; gj < ny; ++gj)
          for (int gi = 0; gi < nx; ++gi)
            level_obj +=
                loss_bce(logit(image, a, 4, gj, gi),
                         tobj[size_t(((image * anchors + a) * ny + gj) * nx + gi)], obj_bce);
    obj += options.balance[l] * level_obj / double(images * anchors * ny * nx);
  }
  CHECK(focal.obj == doctest::Approx(obj * options.hyp.obj).epsilon(1e-12));
  CHECK(focal.cls == doctest::Approx(cls * options.hyp.cls).epsilon(1e-12));
  options.hyp.fl_gamma = 0;  // and it changed both
  const LossValues plain = read_loss(yolo_loss<double>(views, targets, norm, options, {}));
  CHECK(plain.obj > 1.5 * focal.obj);
  CHECK(plain.cls > 1.5 * focal.cls);
  CHECK(plain.box == focal.box);
}

TEST_CASE("loss with global counts splits a batch into shares that add up exactly") {
  // One batch of 4 images, and the same batch as two ranks of 2 images each: every rank
  // normalises by the global counts, so the shares sum to the whole and the gradients of
  // each half equal the corresponding slice of the whole batch's gradient.
  Rng rng(102);
  const int classes = 2, size = 64, outputs = classes + 5;
  const std::vector<LevelGrid> levels = grids(size);
  std::vector<LabelRow> labels = random_labels(rng, 4, 9, classes);
  labels.erase(std::remove_if(labels.begin(), labels.end(), [](auto& l) { return l.image == 3; }),
               labels.end());  // image 3 (on rank 1) has no labels at all
  const LossOptions options{scale_loss_gains({}, 3, classes, size), classes};

  std::vector<std::vector<double>> full(3), full_grad(3);
  std::vector<Shape4> shapes;
  for (size_t l = 0; l < 3; ++l) {
    shapes.push_back({4, 3 * outputs, levels[l].ny, levels[l].nx});
    full[l] = random_vector(rng, shapes[l].numel(), -3, 3);
    full_grad[l].assign(full[l].size(), 0.0);
  }
  auto whole_targets = build_targets(labels, levels, 4.0);
  std::vector<View<const double>> in;
  std::vector<View<double>> grad;
  for (size_t l = 0; l < 3; ++l) {
    in.push_back(dense_view<const double>(full[l].data(), shapes[l]));
    grad.push_back(dense_view(full_grad[l].data(), shapes[l]));
  }
  const LossValues whole = read_loss(
      yolo_loss<double>(in, whole_targets, local_normalization(whole_targets, 4), options, grad));

  LossNormalization global = local_normalization(whole_targets, 4);
  LossValues sum;
  for (int rank = 0; rank < 2; ++rank) {
    std::vector<LabelRow> mine;
    for (LabelRow l : labels)
      if (l.image / 2 == rank) mine.push_back({l.image % 2, l.class_id, l.cx, l.cy, l.w, l.h});
    auto rank_targets = build_targets(mine, levels, 4.0);
    std::vector<View<const double>> rank_in;
    std::vector<std::vector<double>> rank_grad(3);
    std::vector<View<double>> rank_grad_views;
    for (size_t l = 0; l < 3; ++l) {
      Shape4 half = shapes[l];
      half.n = 2;
      rank_in.push_back(dense_view<const double>(full[l].data() + rank * half.numel(), half));
      rank_grad[l].assign(size_t(half.numel()), 0.0);
      rank_grad_views.push_back(dense_view(rank_grad[l].data(), half));
    }
    const LossValues share =
        read_loss(yolo_loss<double>(rank_in, rank_targets, global, options, rank_grad_views));
    sum.box += share.box;
    sum.obj += share.obj;
    sum.cls += share.cls;
    sum.total += share.total;
    for (size_t l = 0; l < 3; ++l) {
      std::vector<double> slice(full_grad[l].begin() + long(rank * rank_grad[l].size()),
                                full_grad[l].begin() + long((rank + 1) * rank_grad[l].size()));
      check_close(rank_grad[l], slice, 1e-12, 1e-15, "rank gradient");
    }
  }
  CHECK(sum.box == doctest::Approx(whole.box).epsilon(1e-12));
  CHECK(sum.obj == doctest::Approx(whole.obj).epsilon(1e-12));
  CHECK(sum.cls == doctest::Approx(whole.cls).epsilon(1e-12));
  CHECK(sum.total == doctest::Approx(whole.total).epsilon(1e-12));
  CHECK(whole.box > 0);
  CHECK(whole.cls > 0);
}

TEST_CASE("yolo_loss gives the same bits on one thread and on two") {
  // The objectness pass runs on the pool, a plane per task; its sums must be combined in a
  // fixed order, not per thread, or training would depend on the thread count.
  Rng rng(104);
  const int images = 8, classes = 3, size = 320, outputs = classes + 5;
  const std::vector<LevelGrid> levels = grids(size);
  const LossOptions options{scale_loss_gains({}, 3, classes, size), classes};
  std::vector<std::vector<float>> heads(3);
  std::vector<Shape4> shapes;
  for (size_t l = 0; l < 3; ++l) {
    shapes.push_back({images, 3 * outputs, levels[l].ny, levels[l].nx});
    heads[l] = convert<float>(random_vector(rng, shapes[l].numel(), -4, 4));
  }
  const auto targets = build_targets(random_labels(rng, images, 7, classes), levels, 4.0);
  const LossNormalization norm = local_normalization(targets, images);
  auto run = [&](int threads, std::vector<std::vector<float>>& grads) {
    const PoolThreads pool(threads);
    std::vector<View<const float>> in;
    std::vector<View<float>> out;
    for (size_t l = 0; l < 3; ++l) {
      in.push_back(dense_view<const float>(heads[l].data(), shapes[l]));
      grads[l].assign(heads[l].size(), 0.0f);
      out.push_back(dense_view(grads[l].data(), shapes[l]));
    }
    return read_loss(yolo_loss<float>(in, targets, norm, options, out));
  };
  std::vector<std::vector<float>> one_grads(3), two_grads(3);
  const LossValues one = run(1, one_grads), two = run(2, two_grads);
  CHECK(one.obj > 0);
  CHECK(two.obj == one.obj);
  CHECK(two.total == one.total);
  for (size_t l = 0; l < 3; ++l) check_close(two_grads[l], one_grads[l], 0, 0, "gradient");
}

TEST_CASE("the loss tensor holds the host loss's values bit for bit") {
  // The values the loss wrote into its tensor against the same formulas summed here on the host,
  // in the loss's order (loss.h, loss.cpp): box and class terms row by row over the levels, the
  // objectness per (image, anchor) plane, the planes added in order; then the gains and the total.
  Rng rng(105);
  const int images = 3, classes = 3, size = 64, anchors = 3, outputs = classes + 5;
  const std::vector<LevelGrid> levels = grids(size);
  LossOptions options{scale_loss_gains({}, 3, classes, size), classes};
  options.hyp.label_smoothing = 0.1;
  const RandomHeads heads = random_heads(rng, images, outputs, levels);
  const std::vector<View<const float>>& in = heads.views;
  const auto targets = build_targets(random_labels(rng, images, 6, classes), levels, 4.0);
  const Tensor loss =
      yolo_loss<float>(in, targets, local_normalization(targets, images), options, {});
  CHECK(loss.device() == Device::cpu());
  CHECK(loss.dtype() == DType::f64);
  CHECK(loss.numel() == kLossItems);

  double box = 0, obj = 0, cls = 0;
  for (size_t l = 0; l < 3; ++l) {
    const int ny = levels[l].ny, nx = levels[l].nx;
    const double rows = double(targets[l].size());
    auto logit = [&](int image, int anchor, int field, int gj, int gi) -> double {
      return in[l].channel(image, anchor * outputs + field)[gj * nx + gi];
    };
    std::vector<double> tobj(size_t(images * anchors * ny * nx), 0.0);
    for (const MatchedRow& r : targets[l]) {
      double box_logits[4];
      for (int f = 0; f < 4; ++f) box_logits[f] = logit(r.image, r.anchor, f, r.gj, r.gi);
      const RowBox terms = row_box(box_logits, {r.tx, r.ty, r.tw, r.th}, r.anchor_w, r.anchor_h);
      box += (1 - terms.ciou) / rows;
      tobj[size_t(((r.image * anchors + r.anchor) * ny + r.gj) * nx + r.gi)] =
          std::max(terms.ciou, 0.0);
      for (int c = 0; c < classes; ++c)
        cls += loss_bce(logit(r.image, r.anchor, 5 + c, r.gj, r.gi), c == r.class_id ? 0.95 : 0.05,
                        options.hyp.cls_bce()) *
               (1.0 / (rows * classes));
    }
    const double per_cell = options.balance[l] / (double(images) * anchors * ny * nx);
    for (int image = 0; image < images; ++image)
      for (int a = 0; a < anchors; ++a) {
        double plane = 0;
        for (int gj = 0; gj < ny; ++gj)
          for (int gi = 0; gi < nx; ++gi)
            plane += loss_bce(logit(image, a, 4, gj, gi),
                              tobj[size_t(((image * anchors + a) * ny + gj) * nx + gi)],
                              options.hyp.obj_bce()) *
                     per_cell;
        obj += plane;
      }
  }
  const LossValues got = read_loss(loss);
  CHECK(got.box == box * options.hyp.box);
  CHECK(got.obj == obj * options.hyp.obj);
  CHECK(got.cls == cls * options.hyp.cls);
  CHECK(got.total == (got.box + got.obj + got.cls) * images);
  CHECK(got.obj > 0);
  CHECK(got.cls > 0);
}

TEST_CASE("a single-class model has no class loss, as YOLOv5 skips it when nc is 1") {
  Rng rng(106);
  const int images = 2, size = 64;
  const std::vector<LevelGrid> levels = grids(size);
  for (int classes : {1, 2}) {
    CAPTURE(classes);
    const RandomHeads heads = random_heads(rng, images, classes + 5, levels);
    const auto targets = build_targets(random_labels(rng, images, 4, classes), levels, 4.0);
    const LossOptions options{scale_loss_gains({}, 3, classes, size), classes};
    const LossValues values = read_loss(
        yolo_loss<float>(heads.views, targets, local_normalization(targets, images), options, {}));
    CHECK(values.box > 0);
    CHECK(values.obj > 0);
    CHECK((values.cls > 0) == (classes > 1));
  }
}

TEST_CASE("read_loss refuses a tensor that is not a loss tensor") {
  CHECK_THROWS_WITH_AS(read_loss(Tensor::zeros({1, 1, 1, 3}, Device::cpu(), DType::f64)),
                       doctest::Contains("got (1,1,1,3) f64"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(read_loss(Tensor::zeros({1, 1, 1, kLossItems})), doctest::Contains("f32"),
                       std::invalid_argument);
}

TEST_CASE("a loss readback reads the values the loss had when it was made") {
  // The trainer makes one right after queuing a step and reads it after queuing the next,
  // whose loss may be written into the same tensor meanwhile.
  Tensor loss = Tensor::from_vector(std::vector<double>{0.5, 0.25, 0.125, 7.0}, {1, 1, 1, 4});
  const LossReadback readback(loss);
  loss.copy_from(Tensor::from_vector(std::vector<double>{9, 9, 9, 9}, {1, 1, 1, 4}));
  const LossValues values = readback.read();
  CHECK(values.box == 0.5);
  CHECK(values.obj == 0.25);
  CHECK(values.cls == 0.125);
  CHECK(values.total == 7.0);
  CHECK(readback.read().total == 7.0);  // read again: the same
  const Tensor spread = Tensor::zeros({2, 2, 1, 2}, Device::cpu(), DType::f64).channels(0, 1);
  CHECK_THROWS_WITH_AS(LossReadback{spread}, doctest::Contains("f64 values"),
                       std::invalid_argument);  // four values, not in one block
}

TEST_CASE("yolo_loss refuses a matched row outside the head it indexes") {
  Rng rng(103);
  const int classes = 2, size = 64, outputs = classes + 5;
  const std::vector<LevelGrid> levels = grids(size);
  const LossOptions options{scale_loss_gains({}, 3, classes, size), classes};
  std::vector<std::vector<double>> heads(3);
  std::vector<View<const double>> in;
  for (size_t l = 0; l < 3; ++l) {
    const Shape4 shape{2, 3 * outputs, levels[l].ny, levels[l].nx};
    heads[l] = random_vector(rng, shape.numel(), -3, 3);
    in.push_back(dense_view<const double>(heads[l].data(), shape));
  }
  auto targets = build_targets(random_labels(rng, 2, 5, classes), levels, 4.0);
  REQUIRE_FALSE(targets[0].empty());
  const LossNormalization norm = local_normalization(targets, 2);
  CHECK_NOTHROW(yolo_loss<double>(in, targets, norm, options, {}));
  auto break_row = [&](auto change) {
    auto broken = targets;
    change(broken[0].back());
    return broken;
  };
  for (auto broken :
       {break_row([](MatchedRow& r) { r.image = 2; }),
        break_row([&](MatchedRow& r) { r.gi = levels[0].nx; }),
        break_row([](MatchedRow& r) { r.gj = -1; }), break_row([](MatchedRow& r) { r.anchor = 3; }),
        break_row([](MatchedRow& r) { r.class_id = classes; })})
    CHECK_THROWS_WITH_AS(yolo_loss<double>(in, broken, norm, options, {}),
                         doctest::Contains("is outside the head's 2 images x 3 anchors"),
                         std::invalid_argument);
}
