// engine/layers/batchnorm2d.cpp — see batchnorm2d.h. The math is in the ops (kernels/ops.h):
// BatchNorm's phases and, for forward_silu / backward_silu, the fused BatchNorm + SiLU ops.
#include "engine/layers/batchnorm2d.h"

#include <array>
#include <stdexcept>
#include <type_traits>

#include "engine/distributed/ddp/sync_batchnorm.h"
#include "engine/tensor_factories.h"
#include "kernels/batchnorm_statistics.h"

namespace bareyolo {

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
                           std::span<Tensor> grad_inputs) {
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
          [&](const P* sum_dy, const P* sum_dy_xhat) {
            ops::batchnorm_backward_apply<T>(inputs[0].view<T>(), grad_output.view<T>(),
                                             save_mean_.view<P>().data, save_invstd_.view<P>().data,
                                             gamma_.view<P>().data, sum_dy, sum_dy_xhat,
                                             global_count_, grad_inputs[0].view<T>());
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

namespace {

// One value per channel as a (1, C, 1, 1) tensor of T on `device`.
template <class T>
Tensor channel_tensor(const std::vector<double>& values, Device device) {
  return Tensor::from_vector(std::vector<T>(values.begin(), values.end()),
                             {1, int64_t(values.size()), 1, 1}, device);
}

void append(std::vector<double>& to, const std::vector<double>& values) {
  to.insert(to.end(), values.begin(), values.end());
}
// `channels` values of `values` from `first` on.
std::vector<double> channel_slice(const std::vector<double>& values, size_t first, int channels) {
  return {values.begin() + int64_t(first), values.begin() + int64_t(first) + channels};
}

}  // namespace

// The synced statistics: phase 1 on this rank's slice (given), the moments of the whole batch
// from every rank's, then the same finish as the single-process op (set_synced_statistics);
// the synced forward then runs phase 2.
template <class P>
void BatchNorm2d::synced_statistics(const Tensor& x, const Tensor& mean, const Tensor& m2) {
  const Shape4 s = x.shape();
  const dist::ChannelMoments local{s.n * s.h * s.w, mean.to_doubles(), m2.to_doubles()};
  set_synced_statistics<P>(x, dist::allgather_moments(*sync_, local, x.device(), sync_tag_));
}

// save_mean_, save_invstd_ and the running statistics (with the unbiased variance) from the
// moments of the whole batch, by the formulas the single-process op uses
// (kernels/batchnorm_statistics.h).
template <class P>
void BatchNorm2d::set_synced_statistics(const Tensor& x, const dist::ChannelMoments& global) {
  if (global.count < 2)
    throw std::invalid_argument("SyncBatchNorm: " + std::to_string(global.count) +
                                " values per channel over all ranks; at least 2 are needed");
  global_count_ = global.count;
  std::vector<double> invstd(global.mean.size()), running_mean = running_mean_.to_doubles(),
                                                  running_var = running_var_.to_doubles();
  for (size_t c = 0; c < invstd.size(); ++c) {
    // The mean as save_mean_ holds it (rounded to P), M2 in double: never rounded.
    const ops::batchnorm::ChannelStatistics statistics =
        ops::batchnorm::channel_statistics(double(P(global.mean[c])), global.m2[c], global.count,
                                           running_mean[c], running_var[c], params_);
    invstd[c] = statistics.invstd;
    running_mean[c] = statistics.running_mean;
    running_var[c] = statistics.running_var;
  }
  save_mean_.copy_from(channel_tensor<P>(global.mean, x.device()));
  save_invstd_.copy_from(channel_tensor<P>(invstd, x.device()));
  running_mean_.copy_from(channel_tensor<P>(running_mean, x.device()));
  running_var_.copy_from(channel_tensor<P>(running_var, x.device()));
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
  synced_statistics<P>(x, save_mean_, local_moments<T>(x));
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

// One all-gather carries every layer's moments, the layers' channels one after another; each
// channel's moments merge over the ranks on their own, so each layer gets what its own
// all-gather would give.
void BatchNorm2d::forward_silu_train_together(std::span<const SiluTrainForward> parts) {
  dist::Communicator* comm = shared_meeting(parts);
  if (!comm) {
    for (const SiluTrainForward& part : parts)
      part.layer.forward_silu_train(part.x, part.mean, part.m2, part.output);
    return;
  }
  const Shape4 s = parts.front().x.shape();
  dist::ChannelMoments local{s.n * s.h * s.w, {}, {}};
  for (const SiluTrainForward& part : parts) {
    append(local.mean, part.mean.to_doubles());
    append(local.m2, part.m2.to_doubles());
  }
  const dist::ChannelMoments global =
      dist::allgather_moments(*comm, local, parts.front().x.device(), meeting_tag(parts));
  size_t first = 0;
  for (const SiluTrainForward& part : parts) {
    const int channels = part.layer.channels_;
    const dist::ChannelMoments own{global.count, channel_slice(global.mean, first, channels),
                                   channel_slice(global.m2, first, channels)};
    first += size_t(channels);
    with_activation_type(part.x.dtype(), [&]<class T>() {
      part.layer.set_synced_statistics<ComputeType<T>>(part.x, own);
      part.layer.apply_silu_train<T>(part.x, part.output);
    });
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
  std::vector<ChannelSums> local;
  ChannelSums all;
  for (const SiluBackward& part : parts)
    with_activation_type(part.x.dtype(), [&]<class T>() {
      local.push_back(part.layer.silu_reduce_synced<T>(part.x, part.grad_output, part.grad_input));
      append(all.dy, local.back().dy);
      append(all.dy_xhat, local.back().dy_xhat);
    });
  dist::allreduce_channel_sums(*comm, all.dy, all.dy_xhat, parts.front().x.device(),
                               meeting_tag(parts));
  size_t first = 0;
  for (size_t k = 0; k < parts.size(); ++k) {
    const SiluBackward& part = parts[k];
    const int channels = part.layer.channels_;
    const ChannelSums global{channel_slice(all.dy, first, channels),
                             channel_slice(all.dy_xhat, first, channels)};
    first += size_t(channels);
    with_activation_type(part.x.dtype(), [&]<class T>() {
      part.layer.silu_apply_synced<T>(part.x, part.grad_output, part.grad_input, local[k], global);
    });
  }
}

// ---- the synced backward's phases ---------------------------------------------------------

// sum(dy) and sum(dy * xhat) feed dx from the whole batch; gamma and beta keep this rank's own
// sums (the reducer averages them like any parameter gradient).
template <class T, class Reduce, class Apply>
void BatchNorm2d::backward_train_synced(const Tensor& x, Reduce reduce, Apply apply) {
  const ChannelSums local = reduce_synced<T>(x, reduce);
  ChannelSums global = local;
  dist::allreduce_channel_sums(*sync_, global.dy, global.dy_xhat, x.device(), sync_tag_);
  apply_synced<T>(x, local, global, apply);
}

template <class T, class Reduce>
BatchNorm2d::ChannelSums BatchNorm2d::reduce_synced(const Tensor& x, Reduce reduce) {
  using P = ComputeType<T>;
  const Shape4 vector = {1, channels_, 1, 1};
  Tensor sum_dy = Tensor::empty(vector, x.device(), gamma_.dtype());
  Tensor sum_dy_xhat = Tensor::empty(vector, x.device(), gamma_.dtype());
  reduce(sum_dy.view<P>().data, sum_dy_xhat.view<P>().data);
  return {sum_dy.to_doubles(), sum_dy_xhat.to_doubles()};
}

template <class T, class Apply>
void BatchNorm2d::apply_synced(const Tensor& x, const ChannelSums& local, const ChannelSums& global,
                               Apply apply) {
  using P = ComputeType<T>;
  const Tensor global_sum_dy = channel_tensor<P>(global.dy, x.device());
  const Tensor global_sum_dy_xhat = channel_tensor<P>(global.dy_xhat, x.device());
  apply(global_sum_dy.view<P>().data, global_sum_dy_xhat.view<P>().data);
  std::vector<double> dgamma = gamma_grad_.to_doubles(), dbeta = beta_grad_.to_doubles();
  for (size_t c = 0; c < dgamma.size(); ++c) {
    dgamma[c] += double(P(local.dy_xhat[c]));
    dbeta[c] += double(P(local.dy[c]));
  }
  gamma_grad_.copy_from(channel_tensor<P>(dgamma, x.device()));
  beta_grad_.copy_from(channel_tensor<P>(dbeta, x.device()));
}

// dx is the phases' workspace (kernels/ops.h): the reduce phase may leave SiLU's gradient in it.
template <class T>
BatchNorm2d::ChannelSums BatchNorm2d::silu_reduce_synced(const Tensor& x, const Tensor& grad_output,
                                                         Tensor& grad_input) {
  using P = ComputeType<T>;
  return reduce_synced<T>(x, [&](P* sum_dy, P* sum_dy_xhat) {
    ops::batchnorm_silu_backward_reduce<T>(
        x.view<T>(), grad_output.view<T>(), save_mean_.view<P>().data, save_invstd_.view<P>().data,
        gamma_.view<P>().data, beta_.view<P>().data, sum_dy, sum_dy_xhat, grad_input.view<T>());
  });
}

template <class T>
void BatchNorm2d::silu_apply_synced(const Tensor& x, const Tensor& grad_output, Tensor& grad_input,
                                    const ChannelSums& local, const ChannelSums& global) {
  using P = ComputeType<T>;
  apply_synced<T>(x, local, global, [&](const P* sum_dy, const P* sum_dy_xhat) {
    ops::batchnorm_silu_backward_apply<T>(x.view<T>(), grad_output.view<T>(),
                                          save_mean_.view<P>().data, save_invstd_.view<P>().data,
                                          gamma_.view<P>().data, beta_.view<P>().data, sum_dy,
                                          sum_dy_xhat, global_count_, grad_input.view<T>());
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
