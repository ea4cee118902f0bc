// models/loss/head_loss.h — YOLOv5's loss of a DetectionModel's head outputs for a batch's labels,
// with the gradient to feed to DetectionModel::backward: the glue between the model (grid
// sizes and anchors), build_targets and yolo_loss, shared by training and `grads`.
//
// Data parallelism splits it in two: head_targets() matches this rank's labels,
// global_normalization() sums the counts over the ranks (docs/ddp.md, section 5), and
// head_loss() computes this rank's share of the global-batch loss. Counts and values stay on
// the head's device (loss.h); read_loss() reads the values on the host.
#pragma once

#include <array>
#include <vector>

#include "models/loss/loss.h"
#include "models/yolo/yolo_model.h"

namespace bareyolo::dist {
class Communicator;
}

namespace bareyolo::models {

struct HeadLoss {
  Tensor loss;                    // the values, on the head's device (read_loss reads them)
  std::vector<Tensor> gradients;  // d total / d head output, one per level
};

// What matching a batch's labels takes of a model (its levels' strides and anchors) and of the
// loss (anchor_t, the classes), copied: the loader's threads match the next batches with it
// while the trainer's thread runs the model (LoaderOptions::match_targets).
class TargetMatcher {
 public:
  TargetMatcher(const DetectionModel& model, const LossOptions& options);

  // The labels (normalised to the network input) of a batch of `images` images matched to
  // grids of `grids` (rows, columns per level); check_label_rows refuses a bad row first.
  LevelTargets match(const std::vector<LabelRow>& labels, int images,
                     const std::vector<std::array<int, 2>>& grids) const;
  // The grids of an input of height x width: each level's stride divides both (the trainer's
  // sizes are multiples of the largest stride), else this throws naming the size.
  std::vector<std::array<int, 2>> grids_of(int height, int width) const;
  // The cells of the model's head for an input of `input`'s shape (grids_of's grids).
  std::vector<LevelCells> cells_of(const Shape4& input) const;
  // A batch's labels matched to the grids of its input size (the loader's hook).
  data::MatchedTargets operator()(const data::Batch& batch) const;
  // The targets of a step's input (n images of height x width): `matched` as it is (the
  // loader's matching), refused when its grids are not this input's, else `labels` matched here.
  LevelTargets targets_of(const Shape4& input, const std::vector<LabelRow>& labels,
                          const data::MatchedTargets* matched) const;

 private:
  std::vector<double> strides_;
  std::vector<std::vector<std::array<double, 2>>> anchors_;  // per level, grid units
  double anchor_t_;
  int classes_;
};

// The grids of `head`, the model's training-mode outputs: rows, columns per level.
std::vector<std::array<int, 2>> head_grids(const std::vector<Tensor>& head);

// The labels (normalised to the network input) matched to the grids of `head`, the model's
// latest training-mode outputs.
LevelTargets head_targets(const DetectionModel& model, const std::vector<Tensor>& head,
                          const std::vector<LabelRow>& labels, const LossOptions& options);

// The counts of the whole batch over the ranks of `comm` (sums of matched rows per level and
// of images), with gradient_scale = world size: the reducer averages, so each rank's gradient
// is scaled up to make the average the sum of the ranks' shares. The counts are summed where
// they are, in place (NCCL reduces a GPU's memory; the host's communicators host memory): the
// local ones, or those of `targets` on `device`.
LossNormalization global_normalization(dist::Communicator& comm, LossNormalization local);
LossNormalization global_normalization(dist::Communicator& comm, const LevelTargets& targets,
                                       int images, const Device& device);

// On the head's device and in its dtype (yolo_loss routes a GPU head to cuda::yolo_loss, which
// reads the rows where they were staged, and nothing comes back; a double head, the reference of
// the checks, runs the host's double loss). `norm`'s counts must be on the head's device.
HeadLoss head_loss(const std::vector<Tensor>& head, const LevelTargets& targets,
                   const LossNormalization& norm, const LossOptions& options);
// The same for rows already staged (LossRows::stage), written into `into`: its gradients (one
// per level, the head's shapes and dtype, zeroed here first) and its loss tensor (empty_loss),
// buffers the caller keeps at one address (a step's CUDA graph writes them there).
HeadLoss head_loss(const std::vector<Tensor>& head, const LossRows& rows,
                   const LossNormalization& norm, const LossOptions& options, HeadLoss into);
// Buffers for head_loss's results for heads of these shapes, on `device` in `dtype`; or for
// `head`'s.
HeadLoss head_loss_buffers(const std::vector<Shape4>& head, const Device& device, DType dtype);
HeadLoss head_loss_buffers(const std::vector<Tensor>& head);

// One process: YOLOv5's loss with this batch's own counts.
HeadLoss head_loss(const DetectionModel& model, const std::vector<Tensor>& head,
                   const std::vector<LabelRow>& labels, const LossOptions& options, int images);

}  // namespace bareyolo::models
