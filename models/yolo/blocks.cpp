// models/yolo/blocks.cpp — see blocks.h. Each backward walks its forward in reverse; its
// gradients between children come from the backward scratch stack (engine/backward_scratch.h),
// held only while the block's backward runs, and are not zeroed: the first child to reach one
// writes it whole (GradientWrite::overwrite), the others add.
#include "models/yolo/blocks.h"

#include <array>
#include <stdexcept>

#include "engine/backward_scratch.h"
#include "engine/tensor_factories.h"

namespace bareyolo::models {

namespace {
Shape4 with_channels(Shape4 s, int64_t channels) {
  s.c = channels;
  return s;
}

// dst += src, elementwise (add_forward may write over one of its inputs).
void accumulate(const Tensor& src, Tensor& dst) {
  with_activation_type(dst.dtype(), [&]<class T>() {
    ops::add_forward<T>(dst.view<T>(), src.view<T>(), dst.view<T>());
  });
}
}  // namespace

// ---- Bottleneck -------------------------------------------------------------------------

Bottleneck::Bottleneck(int c_in, int c_out, bool shortcut, double expansion,
                       const BlockContext& context)
    : cv1_(context.conv(c_in, static_cast<int>(c_out * expansion), 1)),
      cv2_(context.conv(static_cast<int>(c_out * expansion), c_out, 3)),
      add_input_(shortcut && c_in == c_out) {}

Shape4 Bottleneck::output_shape(std::span<const Shape4> inputs) const {
  return cv2_->output_shape(std::array{cv1_->output_shape(inputs)});
}

void Bottleneck::forward(std::span<const Tensor> inputs, Tensor& output, Mode mode) {
  ensure_tensor(hidden_, cv1_->output_shape(std::array{inputs[0].shape()}), output);
  cv1_->forward(inputs, hidden_, mode);
  cv2_->forward(std::span(&hidden_, 1), output, mode);
  if (add_input_) accumulate(inputs[0], output);
}

void Bottleneck::backward(std::span<const Tensor> inputs, const Tensor&, const Tensor& grad_output,
                          std::span<Tensor> grad_inputs, ops::GradientWrite write) {
  // With the shortcut, d out / d x has an identity term: the gradient passes straight through,
  // first (copied when it is the first contribution), and cv1's adds to it.
  if (add_input_) {
    if (write == ops::GradientWrite::overwrite)
      grad_inputs[0].copy_from(grad_output);
    else
      accumulate(grad_output, grad_inputs[0]);
    write = ops::GradientWrite::add;
  }
  BackwardScratch scratch;
  Tensor grad_hidden = scratch.uninitialized(hidden_.shape(), hidden_);
  cv2_->backward(std::span(&hidden_, 1), Tensor(), grad_output, std::span(&grad_hidden, 1),
                 ops::GradientWrite::overwrite);
  cv1_->backward(inputs, hidden_, grad_hidden, grad_inputs, write);
}

void Bottleneck::collect_state(const std::string& prefix, std::vector<StateEntry>& state) {
  cv1_->collect_state(prefix + "cv1.", state);
  cv2_->collect_state(prefix + "cv2.", state);
}

void Bottleneck::for_each_child(const std::function<void(Module&)>& visit) {
  visit(*cv1_);
  visit(*cv2_);
}

void Bottleneck::release_activations() {
  hidden_ = Tensor();
  cv1_->release_activations();
  cv2_->release_activations();
}

// ---- C3 ---------------------------------------------------------------------------------

C3::C3(int c_in, int c_out, int repeats, bool shortcut, const BlockContext& context)
    : hidden_channels_(static_cast<int>(c_out * 0.5)),
      cv1_(context.conv(c_in, hidden_channels_, 1)),
      cv2_(context.conv(c_in, hidden_channels_, 1)),
      cv3_(context.conv(2 * hidden_channels_, c_out, 1)) {
  for (int i = 0; i < repeats; ++i)
    m_.push_back(
        std::make_unique<Bottleneck>(hidden_channels_, hidden_channels_, shortcut, 1.0, context));
}

Shape4 C3::output_shape(std::span<const Shape4> inputs) const {
  return cv3_->output_shape(
      std::array{with_channels(cv1_->output_shape(inputs), 2 * hidden_channels_)});
}

void C3::forward(std::span<const Tensor> inputs, Tensor& output, Mode mode) {
  const Shape4 hidden = cv1_->output_shape(std::array{inputs[0].shape()});
  const int64_t c = hidden_channels_;
  ensure_tensor(cat_, with_channels(hidden, 2 * c), output);
  stages_.resize(m_.size() + 1);
  for (size_t i = 0; i < m_.size(); ++i) ensure_tensor(stages_[i], hidden, output);
  stages_.back() = cat_.channels(0, c);  // the m branch comes first in the concatenation
  if (m_.empty()) stages_[0] = cat_.channels(0, c);

  // cv1 and cv2 read the same input: one SyncBatchNorm meeting serves both.
  Tensor second = cat_.channels(c, 2 * c);
  ConvBnSilu::forward_siblings(*cv1_, *cv2_, inputs[0], stages_[0], second, mode);
  for (size_t i = 0; i < m_.size(); ++i)
    m_[i]->forward(std::span(&stages_[i], 1), stages_[i + 1], mode);
  cv3_->forward(std::span(&cat_, 1), output, mode);
}

void C3::backward(std::span<const Tensor> inputs, const Tensor&, const Tensor& grad_output,
                  std::span<Tensor> grad_inputs, ops::GradientWrite write) {
  const int64_t c = hidden_channels_;
  BackwardScratch scratch;
  Tensor grad_cat = scratch.uninitialized(cat_.shape(), cat_);
  cv3_->backward(std::span(&cat_, 1), Tensor(), grad_output, std::span(&grad_cat, 1),
                 ops::GradientWrite::overwrite);
  // The m branch first, so that cv1's output gradient is complete when cv1 and cv2 go back
  // together (one SyncBatchNorm meeting for both). Stage i's gradient is complete once m_[i]
  // has run and dead once m_[i - 1] has: two buffers serve every stage in turn.
  Tensor grad_stage = grad_cat.channels(0, c);
  Tensor spare[2];
  for (size_t i = m_.size(); i-- > 0;) {
    Tensor& grad_input = spare[i % 2];
    if (!grad_input.defined()) grad_input = scratch.uninitialized(stages_[i].shape(), cat_);
    m_[i]->backward(std::span(&stages_[i], 1), stages_[i + 1], grad_stage,
                    std::span(&grad_input, 1), ops::GradientWrite::overwrite);
    grad_stage = grad_input;
  }
  ConvBnSilu::backward_siblings(*cv1_, grad_stage, *cv2_, grad_cat.channels(c, 2 * c), inputs[0],
                                grad_inputs[0], write);
}

void C3::collect_state(const std::string& prefix, std::vector<StateEntry>& state) {
  cv1_->collect_state(prefix + "cv1.", state);
  cv2_->collect_state(prefix + "cv2.", state);
  cv3_->collect_state(prefix + "cv3.", state);
  for (size_t i = 0; i < m_.size(); ++i)
    m_[i]->collect_state(prefix + "m." + std::to_string(i) + ".", state);
}

void C3::for_each_child(const std::function<void(Module&)>& visit) {
  for (auto* conv : {cv1_.get(), cv2_.get(), cv3_.get()}) visit(*conv);
  for (auto& bottleneck : m_) visit(*bottleneck);
}

void C3::release_activations() {
  stages_.clear();
  cat_ = Tensor();
  for (auto* conv : {cv1_.get(), cv2_.get(), cv3_.get()}) conv->release_activations();
  for (auto& bottleneck : m_) bottleneck->release_activations();
}

// ---- SPPF -------------------------------------------------------------------------------

SPPF::SPPF(int c_in, int c_out, int kernel, const BlockContext& context)
    : hidden_channels_(c_in / 2),
      pool_{kernel, 1, kernel / 2},
      cv1_(context.conv(c_in, hidden_channels_, 1)),
      cv2_(context.conv(4 * hidden_channels_, c_out, 1)) {}

Shape4 SPPF::output_shape(std::span<const Shape4> inputs) const {
  return cv2_->output_shape(
      std::array{with_channels(cv1_->output_shape(inputs), 4 * hidden_channels_)});
}

void SPPF::forward(std::span<const Tensor> inputs, Tensor& output, Mode mode) {
  const int64_t c = hidden_channels_;
  ensure_tensor(cat_, with_channels(cv1_->output_shape(std::array{inputs[0].shape()}), 4 * c),
                output);
  Tensor first = cat_.channels(0, c);
  cv1_->forward(inputs, first, mode);
  with_activation_type(output.dtype(), [&]<class T>() {
    // Slice k+1 = slice k pooled once more; one op, so a GPU reads x once for all three.
    ops::maxpool2d_chain3_forward<T>(first.view<T>(), pool_, cat_.channels(c, 2 * c).view<T>(),
                                     cat_.channels(2 * c, 3 * c).view<T>(),
                                     cat_.channels(3 * c, 4 * c).view<T>());
  });
  cv2_->forward(std::span(&cat_, 1), output, mode);
}

void SPPF::backward(std::span<const Tensor> inputs, const Tensor&, const Tensor& grad_output,
                    std::span<Tensor> grad_inputs, ops::GradientWrite write) {
  const int64_t c = hidden_channels_;
  BackwardScratch scratch;
  Tensor grad_cat = scratch.uninitialized(cat_.shape(), cat_);
  cv2_->backward(std::span(&cat_, 1), Tensor(), grad_output, std::span(&grad_cat, 1),
                 ops::GradientWrite::overwrite);
  with_activation_type(grad_output.dtype(), [&]<class T>() {
    // Slice k+1's gradient is complete once the pools reading it are done: walk back.
    for (int64_t k = 3; k-- > 0;)
      ops::maxpool2d_backward<T>(cat_.channels(k * c, (k + 1) * c).view<T>(),
                                 grad_cat.channels((k + 1) * c, (k + 2) * c).view<T>(), pool_,
                                 grad_cat.channels(k * c, (k + 1) * c).view<T>());
  });
  cv1_->backward(inputs, Tensor(), grad_cat.channels(0, c), grad_inputs, write);
}

void SPPF::collect_state(const std::string& prefix, std::vector<StateEntry>& state) {
  cv1_->collect_state(prefix + "cv1.", state);
  cv2_->collect_state(prefix + "cv2.", state);
}

void SPPF::for_each_child(const std::function<void(Module&)>& visit) {
  visit(*cv1_);
  visit(*cv2_);
}

void SPPF::release_activations() {
  cat_ = Tensor();
  cv1_->release_activations();
  cv2_->release_activations();
}

}  // namespace bareyolo::models
