// engine/layers/batchnorm2d.h — BatchNorm2d: per-channel normalisation with batch statistics
// in training and running statistics in evaluation. State, as PyTorch names it: "weight"
// (gamma), "bias" (beta), "running_mean", "running_var", "num_batches_tracked" (int64).
//
// SyncBatchNorm is this layer with a communicator set (set_sync): training then normalises
// by the statistics of the batch over all ranks (engine/distributed/ddp/sync_batchnorm.h), between
// the two phases of the BN ops; evaluation is unchanged.
//
// Its input and output are stored in the parameters' dtype or, under mixed precision (float
// parameters), in bf16; the statistics and every per-channel value stay in the parameters'.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "engine/module.h"
#include "kernels/ops.h"

namespace bareyolo {

namespace dist {
class Communicator;
}  // namespace dist

class BatchNorm2d : public Module {
 public:
  // gamma = 1, beta = 0, running_mean = 0, running_var = 1, as PyTorch initialises them.
  BatchNorm2d(int channels, ops::BatchNormParams params, Device device = Device::cpu(),
              DType dtype = DType::f32);

  Shape4 output_shape(std::span<const Shape4> inputs) const override;
  void forward(std::span<const Tensor> inputs, Tensor& output, Mode mode) override;
  void backward(std::span<const Tensor> inputs, const Tensor& output, const Tensor& grad_output,
                std::span<Tensor> grad_inputs, ops::GradientWrite write) override;
  void collect_state(const std::string& prefix, std::vector<StateEntry>& state) override;

  // Synchronise the training statistics over the ranks of `comm` (null: this rank alone).
  // `name`, the layer's state name ("model.2.cv1.bn"), names its meetings' collectives.
  void set_sync(dist::Communicator* comm, const std::string& name = "") {
    sync_ = comm;
    sync_tag_ = name.empty() ? "SyncBN" : "SyncBN " + name;
  }
  bool synced() const { return sync_ != nullptr; }

  // forward, then SiLU, as the fused op (ops::batchnorm_silu_apply; one pass on a GPU):
  // `output` = SiLU of this layer's output, which is not stored. The statistics are
  // forward's: the batch's, over the ranks when synced, with the running update, in training;
  // the running ones in evaluation.
  void forward_silu(const Tensor& x, Tensor& output, Mode mode);
  // forward_silu in training from this rank's moments of x (mean and M2 per channel, (1, C, 1,
  // 1), as ops::batchnorm_moments gives them), e.g. gathered by the convolution that wrote x.
  void forward_silu_train(const Tensor& x, const Tensor& mean, const Tensor& m2, Tensor& output);
  // The backward of forward_silu, fused likewise (ops::batchnorm_silu_backward_*, which
  // normalise x again for SiLU's backward): WRITES dL/dx into grad_input (kernels/ops.h says
  // why) from dL/d(SiLU output); the parameter gradients and SyncBN's all-reduce as in
  // backward(). grad_input must not overlap x or grad_output: synced, it is also the two
  // phases' workspace.
  void backward_silu(const Tensor& x, const Tensor& grad_output, Tensor& grad_input);

  // forward_silu_train and backward_silu of several layers, with one SyncBatchNorm meeting for
  // all of them instead of one each: C3's cv1 and cv2 normalise maps of one size computed from
  // the same input, so one collective can carry both layers' channels, one after the other.
  // The results are each layer's own call's (bit for bit on two ranks; from three on, a ring
  // may add a sum's ranks in another order). Layers that are not synced over one
  // communicator, or whose maps differ in size, make their own calls.
  struct SiluTrainForward {
    BatchNorm2d& layer;
    const Tensor &x, &mean, &m2;
    Tensor& output;
  };
  static void forward_silu_train_together(std::span<const SiluTrainForward> parts);
  struct SiluBackward {
    BatchNorm2d& layer;
    const Tensor &x, &grad_output;
    Tensor& grad_input;
  };
  static void backward_silu_together(std::span<const SiluBackward> parts);

 private:
  // The communicator all of `parts` are synced over, when they may share a meeting; else null.
  template <class Part>
  static dist::Communicator* shared_meeting(std::span<const Part> parts);
  template <class Part>
  static std::string meeting_tag(std::span<const Part> parts);

  // Training statistics over the ranks of `comm` from each part's moments of its x, in one
  // all-gather: each layer's save_mean_, save_invstd_, running statistics and global_count_
  // (the phase before the apply; the parts' outputs are not touched). Every value stays on
  // x's device.
  static void synced_statistics(dist::Communicator& comm, std::span<const SiluTrainForward> parts,
                                const std::string& tag);
  template <class T>
  Tensor local_moments(const Tensor& x);
  template <class T>
  void forward_train_synced(const Tensor& x, Tensor& y);
  // forward_silu_train's apply, once the statistics are set.
  template <class T>
  void apply_silu_train(const Tensor& x, Tensor& output);
  // The synced backward around a BN backward's two phases (plain, or behind a fused SiLU):
  // reduce(sum_dy, sum_dy_xhat) over this rank's slice (reduce_synced), then the all-reduce,
  // then apply(the sums over all ranks, per value: count 1) (apply_synced).
  template <class T, class Reduce, class Apply>
  void backward_train_synced(const Tensor& x, Reduce reduce, Apply apply);
  // Runs reduce into a (1, 2 C, 1, 1) tensor of the parameters' type (returned: apply_synced's
  // workspace), adds this rank's sums into dgamma and dbeta, and writes them, widened, into
  // `record` (2 C doubles of the tensor the ranks all-reduce).
  template <class T, class Reduce>
  Tensor reduce_synced(const Tensor& x, Reduce reduce, double* record);
  // The sums over all ranks (`record`, all-reduced) per value into `sums`, then apply on them.
  template <class T, class Apply>
  void apply_synced(const double* record, Tensor& sums, Apply apply);
  // backward_silu's synced phases.
  template <class T>
  Tensor silu_reduce_synced(const Tensor& x, const Tensor& grad_output, Tensor& grad_input,
                            double* record);
  template <class T>
  void silu_apply_synced(const Tensor& x, const Tensor& grad_output, Tensor& grad_input,
                         const double* record, Tensor& sums);

  int channels_;
  dist::Communicator* sync_ = nullptr;
  std::string sync_tag_;  // the tag of its meetings' collectives (communicator.h)
  ops::BatchNormParams params_;
  Mode last_mode_ = Mode::train;
  Tensor gamma_, gamma_grad_, beta_, beta_grad_, running_mean_, running_var_;
  Tensor num_batches_tracked_;      // int64 scalar
  Tensor save_mean_, save_invstd_;  // batch statistics of the last training forward
  // Synced: the values per channel over all ranks in the last training forward, an f64 scalar
  // on the layer's device (the forward's merge writes it, the backward divides by it).
  Tensor global_count_;
  // Synced: what a step's meetings use, kept from step to step so that a warm step allocates
  // nothing: the record this layer sends and the records gathered when it leads a forward
  // meeting, the sums all-reduced when it leads a backward one (or meets alone), and its own
  // channel sums.
  Tensor meeting_record_, meeting_gathered_, meeting_sums_, channel_sums_;
};

}  // namespace bareyolo
