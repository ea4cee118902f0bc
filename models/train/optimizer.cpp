// models/train/optimizer.cpp — see optimizer.h.
#include "models/train/optimizer.h"

namespace bareyolo::models {

TrainOptimizer::TrainOptimizer(OptimizerKind kind, const std::vector<StateEntry>& parameters,
                               double lr0, double momentum, double weight_decay)
    : kind_(kind) {
  if (kind == OptimizerKind::sgd)
    sgd_ = std::make_unique<Sgd>(parameters, lr0, momentum, weight_decay);
  else
    adamw_ = std::make_unique<AdamW>(parameters, lr0, momentum, weight_decay);
}

void TrainOptimizer::apply(const StepSettings& settings) {
  if (sgd_) {
    sgd_->groups()[Sgd::kBiases].lr = settings.bias_lr;
    sgd_->groups()[Sgd::kWeights].lr = sgd_->groups()[Sgd::kNormWeights].lr = settings.lr;
    for (SgdGroup& g : sgd_->groups()) g.momentum = settings.momentum;
  } else {
    adamw_->groups()[AdamW::kBiases].lr = settings.bias_lr;
    adamw_->groups()[AdamW::kWeights].lr = adamw_->groups()[AdamW::kNormWeights].lr = settings.lr;
  }
}

void TrainOptimizer::step() {
  ++steps_;
  if (sgd_) {
    sgd_->step();
  } else {
    adamw_->set_steps(steps_ - 1);  // AdamW::step counts this update itself
    adamw_->step();
  }
}

void TrainOptimizer::zero_grad() {
  if (sgd_)
    sgd_->zero_grad();
  else
    adamw_->zero_grad();
}

double TrainOptimizer::lr(int group) const {
  return sgd_ ? sgd_->groups()[size_t(group)].lr : adamw_->groups()[size_t(group)].lr;
}

std::vector<std::pair<std::string, Tensor*>> TrainOptimizer::buffers() {
  std::vector<std::pair<std::string, Tensor*>> named;
  if (sgd_) {
    for (size_t i = 0; i < sgd_->parameters().size(); ++i)
      named.emplace_back("momentum_buffer." + sgd_->parameters()[i].name, &sgd_->velocities()[i]);
  } else {
    for (size_t i = 0; i < adamw_->parameters().size(); ++i) {
      named.emplace_back("exp_avg." + adamw_->parameters()[i].name, &adamw_->exp_avgs()[i]);
      named.emplace_back("exp_avg_sq." + adamw_->parameters()[i].name, &adamw_->exp_avg_sqs()[i]);
    }
  }
  return named;
}

int64_t TrainOptimizer::steps() const { return steps_; }
void TrainOptimizer::set_steps(int64_t steps) { steps_ = steps; }

}  // namespace bareyolo::models
