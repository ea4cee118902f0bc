// models/loss/gradient_report.cpp — see gradient_report.h.
#include "models/loss/gradient_report.h"

#include <cmath>
#include <stdexcept>

#include "models/loss/head_loss.h"

namespace bareyolo::models {

namespace {
// Raw head output (b, na * no, ny, nx) as YOLOv5's (b, na, ny, nx, no).
std::vector<float> to_yolov5_layout(const Tensor& head, int anchors) {
  const Shape4 s = head.shape();
  const int64_t no = s.c / anchors;
  const std::vector<float> nchw = head.to_vector<float>();
  std::vector<float> out(nchw.size());
  for (int64_t b = 0; b < s.n; ++b)
    for (int64_t a = 0; a < anchors; ++a)
      for (int64_t y = 0; y < s.h; ++y)
        for (int64_t x = 0; x < s.w; ++x)
          for (int64_t k = 0; k < no; ++k)
            out[size_t((((b * anchors + a) * s.h + y) * s.w + x) * no + k)] =
                nchw[size_t(((b * s.c + a * no + k) * s.h + y) * s.w + x)];
  return out;
}
}  // namespace

std::vector<LabelRow> label_rows(const SafetensorsFile& file, const std::string& name,
                                 const std::string& source, int images, int nc) {
  const TensorRecord& record = file.record(name);
  if (record.shape.size() != 2 || record.shape[1] != 6)
    throw std::invalid_argument(source + ": '" + name +
                                "' must be [n, 6] rows of image, class, cx, cy, w, h");
  const std::vector<float> rows = file.values<float>(name);
  std::vector<LabelRow> labels;
  // The image and class columns become ints only once they are whole numbers of a sane size
  // (a float outside int's range, or NaN, has no int value).
  auto index = [&](float value, size_t row, const char* column) {
    if (!(std::isfinite(value) && value == std::floor(value) && std::fabs(value) < 1e9f))
      throw std::invalid_argument(source + ": '" + name + "' row " + std::to_string(row) + ": " +
                                  column + " " + std::to_string(value) + " is not a whole number");
    return int(value);
  };
  for (size_t r = 0; r + 5 < rows.size(); r += 6)
    labels.push_back({index(rows[r], r / 6, "image"), index(rows[r + 1], r / 6, "class"),
                      rows[r + 2], rows[r + 3], rows[r + 4], rows[r + 5]});
  try {
    check_label_rows(labels, images, nc);
  } catch (const std::invalid_argument& error) {
    throw std::invalid_argument(source + ": '" + name + "' " + error.what());
  }
  return labels;
}

SafetensorsFile gradient_report(DetectionModel& model, const Tensor& images,
                                const std::vector<LabelRow>& labels, const LossHyp& hyp) {
  const std::vector<Tensor>& head = model.forward(images, Mode::train);
  const LossOptions options{
      scale_loss_gains(hyp, model.num_levels(), model.num_classes(), int(images.shape().w)),
      model.num_classes()};
  const HeadLoss loss_and_grads = head_loss(model, head, labels, options, int(images.shape().n));
  const LossValues loss = read_loss(loss_and_grads.loss);
  std::vector<StateEntry> state = model.state();
  for (const StateEntry& e : state)
    if (e.trainable()) e.grad->zero();
  model.backward(loss_and_grads.gradients);

  SafetensorsFile report;
  report.add_values<float>("loss", {float(loss.box), float(loss.obj), float(loss.cls)}, {3});
  report.add_values<float>("loss_total", {float(loss.total)}, {1});
  const int na = model.num_anchors();
  for (int level = 0; level < model.num_levels(); ++level) {
    const Shape4 s = head[size_t(level)].shape();
    report.add_values<float>("p" + std::to_string(level + 3),
                             to_yolov5_layout(head[size_t(level)], na),
                             {s.n, na, s.h, s.w, s.c / na});
  }
  for (const StateEntry& e : state)
    if (e.trainable()) report.add_tensor("grad." + e.name, *e.grad, e.dims);
  return report;
}

}  // namespace bareyolo::models
