// engine/layers/batchnorm2d.cpp — see batchnorm2d.h. The math is in the ops (kernels/ops.h):
// BatchNorm's phases and, for forward_silu / backward_silu, the fused BatchNorm + SiLU ops.
#include "engine/layers/batchnorm2d.h"

#include <array>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "engine/distributed/ddp/sync_batchnorm.h"
#include "engine/tensor_factories.h"

namespace bareyolo {

namespace {

// A layer's record of its moments (ops::batchnorm_moments_record): the count, then a mean and
// an M2 per channel.
int64_t moments_record_length(int channels) { return 1 + 2 * int64_t(channels); }

// The apply ops' `count` for sums over all ranks already divided by theirs
// (ops::batchnorm_mean_sums): the count over all ranks is on the device, not the host.
constexpr int64_t kSumsPerValue = 1;

}  // namespace

BatchNorm2d::BatchNorm2d(int channels, ops::BatchNormParams params, Device device, DType dtype)
    : channels_(channels), params_(params) {
  if (!(params.eps > 0) || !(params.momentum > 0 && params.momentum <= 1))
    throw std::invalid_argument("BatchNorm2d: eps " + std::to_string(params.eps) +
                                " must be > 0 and momentum " + std::to_string(params.momentum) +
                                " in (0, 1]");
  const Shape4 vector = {1, channels, 1, 1};
  gamma_ = filled_tensor(vector, 1.0, device, dtype);
  beta_ = Tensor::zeros(vector, device, dtype);
  gamma_grad_ = Tensor::zeros(vector, device, dtype);
  beta_grad_ = Tensor::zeros(vector, device, dtype);
  running_mean_ = Tensor::zeros(vector, device, dtype);
  running_var_ = filled_tensor(vector, 1.0, device, dtype);
  num_batches_tracked_ = Tensor::zeros({1, 1, 1, 1}, Device::cpu(), DType::i64);
  save_mean_ = Tensor::zeros(vector, device, dtype);
  save_invstd_ = Tensor::zeros(vector, device, dtype);
  global_count_ = Tensor::zeros({1, 1, 1, 1}, device, DType::f64);
}

Shape4 BatchNorm2d::output_shape(std::span<const Shape4> inputs) const {
  if (inputs.size() != 1 || inputs[0].c != channels_)
    throw std::invalid_argument("BatchNorm2d expects one input with " + std::to_string(channels_) +
                                " channels, got " +
                                (inputs.empty() ? std::string("none") : inputs[0].str()));
  return inputs[0];
}

void BatchNorm2d::forward(std::span<const Tensor> inputs, Tensor& output, Mode mode) {
  last_mode_ = mode;
  with_activation_type(inputs[0].dtype(), [&]<class T>() {
    using P = ComputeType<T>;
    if (mode == Mode::train && sync_) {
      forward_train_synced<T>(inputs[0], output);
      num_batches_tracked_.view<int64_t>().data[0] += 1;
    } else if (mode == Mode::train) {
      ops::batchnorm_forward_train<T>(inputs[0].view<T>(), gamma_.view<P>().data,
                                      beta_.view<P>().data, params_, running_mean_.view<P>().data,
                                      running_var_.view<P>().data, save_mean_.view<P>().data,
                                      save_invstd_.view<P>().data, output.view<T>());
      num_batches_tracked_.view<int64_t>().data[0] += 1;
    } else {
      ops::batchnorm_forward_eval<T>(inputs[0].view<T>(), gamma_.view<P>().data,
                                     beta_.view<P>().data, running_mean_.view<P>().data,
                                     running_var_.view<P>().data, params_, output.view<T>());
    }
  });
}

void BatchNorm2d::backward(std::span<const Tensor> inputs, const Tensor&, const Tensor& grad_output,
                           std::span<Tensor> grad_inputs, ops::GradientWrite write) {
  // BatchNorm's backward ops add into dx (ConvBnSilu runs the fused ones, which write).
  if (write == ops::GradientWrite::overwrite) grad_inputs[0].zero();
  with_activation_type(grad_output.dtype(), [&]<class T>() {
    using P = ComputeType<T>;
    if (last_mode_ == Mode::train && sync_)
      backward_train_synced<T>(
          inputs[0],
          [&](P* sum_dy, P* sum_dy_xhat) {
            ops::batchnorm_backward_reduce<T>(inputs[0].view<T>(), grad_output.view<T>(),
                                              save_mean_.view<P>().data,
                                              save_invstd_.view<P>().data, sum_dy, sum_dy_xhat);
          },
          [&](const P* mean_dy, const P* mean_dy_xhat) {
            ops::batchnorm_backward_apply<T>(inputs[0].view<T>(), grad_output.view<T>(),
                                             save_mean_.view<P>().data, save_invstd_.view<P>().data,
                                             gamma_.view<P>().data, mean_dy, mean_dy_xhat,
                                             kSumsPerValue, grad_inputs[0].view<T>());
          });
    else if (last_mode_ == Mode::train)
      ops::batchnorm_backward_train<T>(inputs[0].view<T>(), grad_output.view<T>(),
                                       gamma_.view<P>().data, save_mean_.view<P>().data,
                                       save_invstd_.view<P>().data, grad_inputs[0].view<T>(),
                                       gamma_grad_.view<P>().data, beta_grad_.view<P>().data);
    else
      ops::batchnorm_backward_eval<T>(
          inputs[0].view<T>(), grad_output.view<T>(), gamma_.view<P>().data,
          running_mean_.view<P>().data, running_var_.view<P>().data, params_,
          grad_inputs[0].view<T>(), gamma_grad_.view<P>().data, beta_grad_.view<P>().data);
  });
}

// This rank's moments of x: the mean into save_mean_ (the finish overwrites it), M2 returned.
template <class T>
Tensor BatchNorm2d::local_moments(const Tensor& x) {
  using P = ComputeType<T>;
  Tensor m2 = Tensor::empty({1, channels_, 1, 1}, x.device(), gamma_.dtype());
  ops::batchnorm_moments<T>(x.view<T>(), save_mean_.view<P>().data, m2.view<P>().data);
  return m2;
}

template <class T>
void BatchNorm2d::forward_train_synced(const Tensor& x, Tensor& y) {
  using P = ComputeType<T>;
  const Tensor m2 = local_moments<T>(x);
  synced_statistics(*sync_, std::array{SiluTrainForward{*this, x, save_mean_, m2, y}}, sync_tag_);
  ops::batchnorm_apply<T>(x.view<T>(), save_mean_.view<P>().data, save_invstd_.view<P>().data,
                          gamma_.view<P>().data, beta_.view<P>().data, y.view<T>());
}

void BatchNorm2d::forward_silu(const Tensor& x, Tensor& output, Mode mode) {
  if (mode == Mode::train) {
    Tensor m2;
    with_activation_type(x.dtype(), [&]<class T>() { m2 = local_moments<T>(x); });
    return forward_silu_train(x, save_mean_, m2, output);
  }
  last_mode_ = mode;
  with_activation_type(x.dtype(), [&]<class T>() {
    using P = ComputeType<T>;
    Tensor running_invstd = Tensor::empty({1, channels_, 1, 1}, x.device(), gamma_.dtype());
    ops::batchnorm_running_inverse_std<P>(running_var_.view<P>().data, channels_, params_.eps,
                                          x.device(), running_invstd.view<P>().data);
    // On a GPU kernels run in stream order: running_invstd's block is reused only by later work.
    ops::batchnorm_silu_apply<T>(x.view<T>(), running_mean_.view<P>().data,
                                 running_invstd.view<P>().data, gamma_.view<P>().data,
                                 beta_.view<P>().data, output.view<T>());
  });
}

void BatchNorm2d::forward_silu_train(const Tensor& x, const Tensor& mean, const Tensor& m2,
                                     Tensor& output) {
  if (sync_)
    return forward_silu_train_together(std::array{SiluTrainForward{*this, x, mean, m2, output}});
  with_activation_type(x.dtype(), [&]<class T>() {
    using P = ComputeType<T>;
    const Shape4 s = x.shape();
    ops::batchnorm_statistics_from_moments<P>(
        mean.view<P>().data, m2.view<P>().data, channels_, s.n * s.h * s.w, params_, x.device(),
        running_mean_.view<P>().data, running_var_.view<P>().data, save_mean_.view<P>().data,
        save_invstd_.view<P>().data);
    apply_silu_train<T>(x, output);
  });
}

template <class T>
void BatchNorm2d::apply_silu_train(const Tensor& x, Tensor& output) {
  using P = ComputeType<T>;
  last_mode_ = Mode::train;
  num_batches_tracked_.view<int64_t>().data[0] += 1;
  ops::batchnorm_silu_apply<T>(x.view<T>(), save_mean_.view<P>().data, save_invstd_.view<P>().data,
                               gamma_.view<P>().data, beta_.view<P>().data, output.view<T>());
}

void BatchNorm2d::backward_silu(const Tensor& x, const Tensor& grad_output, Tensor& grad_input) {
  if (last_mode_ == Mode::train && sync_)
    return backward_silu_together(std::array{SiluBackward{*this, x, grad_output, grad_input}});
  with_activation_type(x.dtype(), [&]<class T>() {
    using P = ComputeType<T>;
    const View<const T> xv = x.view<T>(), dy = grad_output.view<T>();
    if (last_mode_ == Mode::train)
      ops::batchnorm_silu_backward_train<T>(xv, dy, gamma_.view<P>().data, beta_.view<P>().data,
                                            save_mean_.view<P>().data, save_invstd_.view<P>().data,
                                            grad_input.view<T>(), gamma_grad_.view<P>().data,
                                            beta_grad_.view<P>().data);
    else
      ops::batchnorm_silu_backward_eval<T>(
          xv, dy, gamma_.view<P>().data, beta_.view<P>().data, running_mean_.view<P>().data,
          running_var_.view<P>().data, params_, grad_input.view<T>(), gamma_grad_.view<P>().data,
          beta_grad_.view<P>().data);
  });
}

// ---- meetings shared by several layers --------------------------------------------------

template <class Part>
dist::Communicator* BatchNorm2d::shared_meeting(std::span<const Part> parts) {
  if (parts.empty()) return nullptr;
  const Tensor& first = parts.front().x;
  dist::Communicator* comm = parts.front().layer.sync_;
  for (const Part& part : parts) {
    const Shape4 s = part.x.shape(), f = first.shape();
    // Backward shares only a meeting of layers whose forward was in training.
    const bool trained =
        std::is_same_v<Part, SiluTrainForward> || part.layer.last_mode_ == Mode::train;
    if (part.layer.sync_ != comm || !trained || s.n * s.h * s.w != f.n * f.h * f.w ||
        part.x.dtype() != first.dtype() || part.x.device() != first.device())
      return nullptr;
  }
  return comm;
}

// The tag of a meeting of `parts`: the first layer's, and how many more came along
// ("SyncBN model.2.cv1.bn +1").
template <class Part>
std::string BatchNorm2d::meeting_tag(std::span<const Part> parts) {
  const std::string& first = parts.front().layer.sync_tag_;
  return parts.size() == 1 ? first : first + " +" + std::to_string(parts.size() - 1);
}

// One all-gather carries every layer's moments, their records one after another; each
// channel's moments merge over the ranks on their own, so each layer gets what its own
// all-gather would give.
void BatchNorm2d::forward_silu_train_together(std::span<const SiluTrainForward> parts) {
  dist::Communicator* comm = shared_meeting(parts);
  if (!comm) {
    for (const SiluTrainForward& part : parts)
      part.layer.forward_silu_train(part.x, part.mean, part.m2, part.output);
    return;
  }
  synced_statistics(*comm, parts, meeting_tag(parts));
  for (const SiluTrainForward& part : parts)
    with_activation_type(part.x.dtype(),
                         [&]<class T>() { part.layer.apply_silu_train<T>(part.x, part.output); });
}

void BatchNorm2d::synced_statistics(dist::Communicator& comm,
                                    std::span<const SiluTrainForward> parts,
                                    const std::string& tag) {
  const Shape4 s = parts.front().x.shape();
  const int64_t count = s.n * s.h * s.w, world = comm.world_size();
  // Every rank checks its own count, so the total is at least count + world - 1; the exact
  // total stays on the device.
  if (count < 1 || count + world - 1 < 2)
    throw std::invalid_argument("SyncBatchNorm: " + std::to_string(count) +
                                " values per channel on this rank of " + std::to_string(world) +
                                "; every rank needs at least 1, and all of them together 2");
  const Device device = parts.front().x.device();
  int64_t length = 0;
  for (const SiluTrainForward& part : parts) length += moments_record_length(part.layer.channels_);
  BatchNorm2d& leader = parts.front().layer;  // keeps the meeting's buffers
  ensure_tensor(leader.meeting_record_, {1, length, 1, 1}, device, DType::f64);
  double* next = leader.meeting_record_.view<double>().data;
  for (const SiluTrainForward& part : parts) {
    BatchNorm2d& layer = part.layer;
    with_activation_type(part.x.dtype(), [&]<class T>() {
      using P = ComputeType<T>;
      ops::batchnorm_moments_record<P>(part.mean.view<P>().data, part.m2.view<P>().data,
                                       layer.channels_, count, device, next);
    });
    next += moments_record_length(layer.channels_);
  }
  dist::allgather_moment_records(comm, leader.meeting_record_, leader.meeting_gathered_, tag);
  const double* records = leader.meeting_gathered_.view<double>().data;
  for (const SiluTrainForward& part : parts) {
    BatchNorm2d& layer = part.layer;
    with_activation_type(part.x.dtype(), [&]<class T>() {
      using P = ComputeType<T>;
      ops::batchnorm_statistics_from_records<P>(
          records, world, length, layer.channels_, layer.params_, device,
          layer.running_mean_.view<P>().data, layer.running_var_.view<P>().data,
          layer.save_mean_.view<P>().data, layer.save_invstd_.view<P>().data,
          layer.global_count_.view<double>().data);
    });
    records += moments_record_length(layer.channels_);
  }
}

// One all-reduce carries every layer's sums, likewise. (A ring adds each value's ranks in an
// order that depends on where the value falls in the buffer: from three ranks on, the last bit
// of a sum in double may differ from its own all-reduce's.)
void BatchNorm2d::backward_silu_together(std::span<const SiluBackward> parts) {
  dist::Communicator* comm = shared_meeting(parts);
  if (!comm) {
    for (const SiluBackward& part : parts)
      part.layer.backward_silu(part.x, part.grad_output, part.grad_input);
    return;
  }
  int64_t channels = 0;
  for (const SiluBackward& part : parts) channels += part.layer.channels_;
  Tensor& all = parts.front().layer.meeting_sums_;  // the meeting's leader keeps it
  ensure_tensor(all, {1, 2 * channels, 1, 1}, parts.front().x.device(), DType::f64);
  double* const records = all.view<double>().data;
  std::vector<Tensor> sums;
  double* record = records;
  for (const SiluBackward& part : parts) {
    with_activation_type(part.x.dtype(), [&]<class T>() {
      sums.push_back(
          part.layer.silu_reduce_synced<T>(part.x, part.grad_output, part.grad_input, record));
    });
    record += 2 * part.layer.channels_;
  }
  dist::allreduce_channel_sums(*comm, all, meeting_tag(parts));
  record = records;
  for (size_t k = 0; k < parts.size(); ++k) {
    const SiluBackward& part = parts[k];
    with_activation_type(part.x.dtype(), [&]<class T>() {
      part.layer.silu_apply_synced<T>(part.x, part.grad_output, part.grad_input, record, sums[k]);
    });
    record += 2 * part.layer.channels_;
  }
}

// ---- the synced backward's phases ---------------------------------------------------------

// sum(dy) and sum(dy * xhat) feed dx from the whole batch; gamma and beta keep this rank's own
// sums (the reducer averages them like any parameter gradient).
template <class T, class Reduce, class Apply>
void BatchNorm2d::backward_train_synced(const Tensor& x, Reduce reduce, Apply apply) {
  ensure_tensor(meeting_sums_, {1, 2 * channels_, 1, 1}, x.device(), DType::f64);
  Tensor sums = reduce_synced<T>(x, reduce, meeting_sums_.view<double>().data);
  dist::allreduce_channel_sums(*sync_, meeting_sums_, sync_tag_);
  apply_synced<T>(meeting_sums_.view<double>().data, sums, apply);
}

template <class T, class Reduce>
Tensor BatchNorm2d::reduce_synced(const Tensor& x, Reduce reduce, double* record) {
  using P = ComputeType<T>;
  ensure_tensor(channel_sums_, {1, 2 * channels_, 1, 1}, x.device(), gamma_.dtype());
  Tensor sums = channel_sums_;
  P* sum_dy = sums.view<P>().data;
  P* sum_dy_xhat = sum_dy + channels_;
  reduce(sum_dy, sum_dy_xhat);
  ops::batchnorm_sums_record<P>(sum_dy, sum_dy_xhat, channels_, x.device(),
                                gamma_grad_.view<P>().data, beta_grad_.view<P>().data, record);
  return sums;
}

template <class T, class Apply>
void BatchNorm2d::apply_synced(const double* record, Tensor& sums, Apply apply) {
  using P = ComputeType<T>;
  P* mean_dy = sums.view<P>().data;
  P* mean_dy_xhat = mean_dy + channels_;
  ops::batchnorm_mean_sums<P>(record, channels_, global_count_.view<double>().data, sums.device(),
                              mean_dy, mean_dy_xhat);
  apply(mean_dy, mean_dy_xhat);
}

// dx is the phases' workspace (kernels/ops.h): the reduce phase may leave SiLU's gradient in it.
template <class T>
Tensor BatchNorm2d::silu_reduce_synced(const Tensor& x, const Tensor& grad_output,
                                       Tensor& grad_input, double* record) {
  using P = ComputeType<T>;
  return reduce_synced<T>(
      x,
      [&](P* sum_dy, P* sum_dy_xhat) {
        ops::batchnorm_silu_backward_reduce<T>(
            x.view<T>(), grad_output.view<T>(), save_mean_.view<P>().data,
            save_invstd_.view<P>().data, gamma_.view<P>().data, beta_.view<P>().data, sum_dy,
            sum_dy_xhat, grad_input.view<T>());
      },
      record);
}

template <class T>
void BatchNorm2d::silu_apply_synced(const Tensor& x, const Tensor& grad_output, Tensor& grad_input,
                                    const double* record, Tensor& sums) {
  using P = ComputeType<T>;
  apply_synced<T>(record, sums, [&](const P* mean_dy, const P* mean_dy_xhat) {
    ops::batchnorm_silu_backward_apply<T>(x.view<T>(), grad_output.view<T>(),
                                          save_mean_.view<P>().data, save_invstd_.view<P>().data,
                                          gamma_.view<P>().data, beta_.view<P>().data, mean_dy,
                                          mean_dy_xhat, kSumsPerValue, grad_input.view<T>());
  });
}

void BatchNorm2d::collect_state(const std::string& prefix, std::vector<StateEntry>& state) {
  const int64_t c = channels_;
  state.push_back({prefix + "weight", &gamma_, &gamma_grad_, {c}, ParamGroup::norm_weight});
  state.push_back({prefix + "bias", &beta_, &beta_grad_, {c}, ParamGroup::bias});
  state.push_back({prefix + "running_mean", &running_mean_, nullptr, {c}});
  state.push_back({prefix + "running_var", &running_var_, nullptr, {c}});
  state.push_back({prefix + "num_batches_tracked", &num_batches_tracked_, nullptr, {}});
}

}  // namespace bareyolo
