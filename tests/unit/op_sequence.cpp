// tests/unit/op_sequence.cpp — the op sequence recorder (kernels/op_sequence.h) and what it shows
// of a training step: after warm-up, two consecutive Solver steps of batches with different labels
// issue the same ops on the same memory with the same values and allocate nothing, the numbers
// that change from step to step (learning rates, momentum, the EMA's decay) reaching the kernels
// through the step scalars' one upload before the step (engine/step_scalars.h), and the batch's
// matched rows and counts through the loss's buffers (models/loss/loss_rows.h). That is what lets
// a CUDA graph captured from one step replay the next, in NCHW and in channels last. And a step
// zeroes no activation gradient.
#include "kernels/op_sequence.h"

#include <algorithm>
#include <string>
#include <vector>

#include "engine/shipped_files.h"
#include "engine/step_scalars.h"
#include "kernels/ops.h"
#include "kernels/optim_update.h"
#include "kernels/staged_copies.h"
#include "models/train/solver.h"
#include "tests/support/testing.h"

using namespace bareyolo;
using namespace bareyolo::models;
using namespace bareyolo::testing;

namespace {

// The calls where two sequences part (the first 20), for a failure's message.
std::string differences(const std::vector<op_sequence::Call>& a,
                        const std::vector<op_sequence::Call>& b) {
  std::string text;
  int shown = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()) && shown < 20; ++i)
    if (!(a[i] == b[i])) {
      text += "\ncall " + std::to_string(i) + ":\n  " + a[i].str() + "\n  " + b[i].str();
      ++shown;
    }
  return text + "\n" + std::to_string(a.size()) + " calls against " + std::to_string(b.size());
}

size_t count_op(const std::vector<op_sequence::Call>& calls, const std::string& op) {
  size_t count = 0;
  for (const op_sequence::Call& call : calls) count += call.op == op;
  return count;
}

}  // namespace

TEST_CASE("op sequence: a call is its op, its views, its pointers and its values") {
  std::vector<float> x = {0.5f, -1, 2, 3}, y(4), other(4);
  op_sequence::Recording recording;
  ops::silu_forward<float>(flat_view<const float>(x.data(), 4), flat_view(y.data(), 4));
  ops::silu_forward<float>(flat_view<const float>(x.data(), 4), flat_view(other.data(), 4));
  const double counts[] = {3, 7}, more[] = {3, 8};
  double on_device[2];
  upload_without_waiting(on_device, Device::cpu(), counts, sizeof counts);
  upload_without_waiting(on_device, Device::cpu(), more, sizeof more);
  const std::vector<op_sequence::Call> calls = recording.take();
  REQUIRE(calls.size() == 4);
  CHECK(calls[0].op == "silu_forward");
  REQUIRE(calls[0].arguments.size() == 2);
  CHECK(calls[0].arguments[0] == calls[1].arguments[0]);  // the same input
  CHECK(calls[0].arguments[1] != calls[1].arguments[1]);  // another output buffer
  CHECK(calls[0].arguments[1].find("(1,1,1,4)") != std::string::npos);
  // An upload is its bytes too: a graph could not replay one with other bytes.
  CHECK(calls[2].op == "upload");
  CHECK(!(calls[2] == calls[3]));
  CHECK(recording.take().empty());  // taken
}

TEST_CASE("op sequence: an update op is called with where its settings are, not their values") {
  std::vector<float> w(8, 1), g(8, 0.5f), v(8, 0);
  const std::vector<uint8_t> group_of(8, 0);
  StepScalars block(Device::cpu());
  const StepScalars::Slot slot = block.reserve<ops::SgdFactors<float>>(1);
  std::vector<op_sequence::Call> calls;
  std::vector<std::vector<float>> weights;
  for (double lr : {0.1, 0.2}) {
    const ops::SgdFactors<float> factors = ops::SgdFactors<float>::of({.lr = lr});
    block.set(slot, std::span{&factors, 1});
    block.upload();
    op_sequence::Recording recording;
    ops::sgd_step<float>(flat_view(w.data(), 8), flat_view<const float>(g.data(), 8),
                         flat_view(v.data(), 8), flat_view(group_of.data(), 8),
                         block.at<ops::SgdFactors<float>>(slot), 1);
    calls.push_back(recording.take().at(0));
    weights.push_back(w);
  }
  CHECK(calls[0] == calls[1]);
  // ... and each step used the learning rate the block held: the second moved twice as far.
  CHECK(weights[0][0] == doctest::Approx(1 - 0.1 * 0.5 * (1 + 0.937)));
  CHECK(1 - weights[1][0] > 1.9 * (1 - weights[0][0]));
  // Setting the same numbers again leaves nothing to upload.
  const int64_t uploads = block.uploads();
  const ops::SgdFactors<float> same = ops::SgdFactors<float>::of({.lr = 0.2});
  block.set(slot, std::span{&same, 1});
  block.upload();
  CHECK(block.uploads() == uploads);
  CHECK_THROWS_AS(block.reserve<double>(StepScalars::kBytes), std::logic_error);
}

TEST_CASE(
    "op sequence: two warm Solver steps of other labels issue the same ops, in both layouts") {
  // Channels last too: its ops run on NCHW copies (kernels/nchw_adapter.h) whose buffers must
  // stay where they are from step to step, as a graph's replay needs.
  for (bool channels_last : {false, true}) {
    CAPTURE(channels_last);
    DetectionModel model(load_model_config(shipped_file("models/yolov5-tiny.yaml")),
                         {.nc = 2, .seed = 5});
    // One batch per optimizer step during warm-up (nbs = batch): every step updates, and the
    // learning rates and momentum move at every iteration, the EMA's decay at every update.
    Solver solver(model, {.epochs = 20,
                          .batches_per_epoch = 10,
                          .batch = 2,
                          .nbs = 2,
                          .loss = {scale_loss_gains({}, 3, 2, 64), 2},
                          .channels_last = channels_last});
    Rng rng(17);
    const Tensor images =
        Tensor::from_vector(random_vector<float>(rng, 2 * 3 * 64 * 64, 0, 1), {2, 3, 64, 64});
    // Batches of two and of three labels: their matched rows differ in number and in cells.
    const std::vector<LabelRow> batches[] = {
        {{0, 0, 0.3f, 0.4f, 0.2f, 0.3f}, {1, 1, 0.6f, 0.5f, 0.4f, 0.2f}},
        {{0, 1, 0.7f, 0.2f, 0.3f, 0.3f},
         {1, 0, 0.2f, 0.6f, 0.1f, 0.4f},
         {1, 1, 0.5f, 0.5f, 0.6f, 0.5f}}};
    for (int64_t iteration = 0; iteration < 3; ++iteration)  // warm-up: the allocator fills
      solver.step(images, batches[iteration % 2], iteration);
    std::vector<std::vector<op_sequence::Call>> before, steps;
    for (int64_t iteration = 3; iteration < 5; ++iteration) {
      const int64_t uploads = solver.arena().step_scalars().uploads();
      op_sequence::Recording recording;
      CHECK(solver.step(images, batches[iteration % 2], iteration).updated);
      const std::vector<op_sequence::Call> calls = recording.take();
      CHECK(solver.arena().step_scalars().uploads() == uploads + 1);
      const auto marked = [&](const char* mark) {
        return std::find_if(calls.begin(), calls.end(),
                            [&](const op_sequence::Call& call) { return call.op == mark; });
      };
      const auto begins = marked("step begins"), ends = marked("step ends");
      REQUIRE(begins < ends);
      REQUIRE(ends != calls.end());
      before.emplace_back(calls.begin(), begins);
      steps.emplace_back(begins, ends);
    }
    REQUIRE(solver.schedule().at(3).lr != solver.schedule().at(4).lr);
    // Before the step's kernels: the step scalars' upload (the new learning rates, momentum and
    // decay), the loss's counts and its matched rows, each into the same memory as the step before
    // with other bytes. A graph's replay is preceded by them.
    for (const std::vector<op_sequence::Call>& calls : before) {
      REQUIRE(count_op(calls, "upload") == 3);
      CHECK(count_op(calls, "allocate") == 0);
    }
    for (size_t upload = 0; upload < 3; ++upload) {
      CAPTURE(upload);
      CHECK(before[0][upload].arguments[0] == before[1][upload].arguments[0]);  // the same place
      CHECK(before[0][upload].arguments[2] != before[1][upload].arguments[2]);  // other numbers
    }
    // The step itself: the same calls, to the byte, and no allocation (the loss's results, the
    // head's gradients and the clipping's sum included: the Solver and the arena keep them).
    INFO("differences: ", differences(steps[0], steps[1]));
    CHECK(steps[0] == steps[1]);
    CHECK(count_op(steps[0], "allocate") == 0);
    // The whole step is there: forward, loss, backward, clipping, the update and the EMA, and
    // nothing that copies from the host.
    CHECK(count_op(steps[0], "conv2d_forward") > 0);
    CHECK(count_op(steps[0], "yolo_loss") == 1);
    CHECK(count_op(steps[0], "conv2d_backward_weight") > 0);
    CHECK(count_op(steps[0], "clip_to_norm") == 1);
    CHECK(count_op(steps[0], "sgd_step") == 1);
    CHECK(count_op(steps[0], "ema_update") >= 1);
    CHECK(count_op(steps[0], "upload") == 0);
    // Channels last: the graph lays out its input and its head at its edges.
    CHECK((count_op(steps[0], "copy_elements") > 0) == channels_last);
    // Zeroed: the parameters' gradients (zero_grad, one pass over the arena) and the head's
    // gradients the loss adds into, one per level; no activation gradient, since each one's first
    // writer writes it whole (kernels/ops.h: GradientWrite; Graph::write_first_gradients).
    std::vector<std::string> zeroed;
    for (const op_sequence::Call& call : steps[0])
      if (call.op == "zero") zeroed.push_back(call.arguments.at(0));
    INFO("zeroed: ", zeroed.size());
    CHECK(zeroed.size() == 1 + size_t(model.num_levels()));
    CHECK(std::count(zeroed.begin(), zeroed.end(),
                     op_sequence::describe(solver.arena().gradients().view<float>().data)) == 1);
  }
}
