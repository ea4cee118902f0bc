// tests/unit/target_matching.cpp — the loss's targets matched on the loader's threads
// (TargetMatcher, models/loss/head_loss.h): a batch's matched targets are, row for row, what
// the step matches itself from the head's grids; a Solver step on them moves the weights bit
// for bit as one that matches them itself, and other targets give another loss; an input size no
// stride divides, and targets matched to other grids than the head's, are refused.
#include "data/batch.h"
#include "engine/shipped_files.h"
#include "models/train/solver.h"
#include "tests/support/random_images.h"
#include "tests/support/testing.h"

using namespace bareyolo;
using namespace bareyolo::models;
using namespace bareyolo::testing;

namespace {

DetectionModel tiny_model() {
  return DetectionModel(load_model_config(shipped_file("models/yolov5-tiny.yaml")),
                        {.nc = 2, .seed = 5});
}

LossOptions tiny_loss() { return {scale_loss_gains({}, 3, 2, 64), 2}; }

// A batch of `size` random images of width x height with labels of both classes, spread so
// that each level matches some of them.
data::Batch labelled_batch(Rng& rng, int size, int width, int height) {
  std::vector<data::Sample> samples = random_samples(rng, size, width, height);
  data::Step step;
  step.width = width, step.height = height;
  data::Batch batch = data::collate(step, samples);
  batch.targets.clear();
  for (int i = 0; i < size; ++i)
    for (float box : {0.05f, 0.2f, 0.6f})
      batch.targets.insert(batch.targets.end(), {float(i), float(i % 2), 0.3f + 0.1f * float(i),
                                                 0.55f, box, box * 0.7f});
  return batch;
}

bool same_rows(const std::vector<MatchedRow>& a, const std::vector<MatchedRow>& b) {
  if (a.size() != b.size()) return false;
  for (size_t r = 0; r < a.size(); ++r) {
    const MatchedRow &x = a[r], &y = b[r];
    if (x.image != y.image || x.anchor != y.anchor || x.gj != y.gj || x.gi != y.gi ||
        x.tx != y.tx || x.ty != y.ty || x.tw != y.tw || x.th != y.th || x.anchor_w != y.anchor_w ||
        x.anchor_h != y.anchor_h || x.class_id != y.class_id)
      return false;
  }
  return true;
}

}  // namespace

TEST_CASE("target matcher: a batch's targets are what the step matches from the head") {
  Rng rng(91);
  DetectionModel model = tiny_model();
  const data::Batch batch = labelled_batch(rng, 3, 96, 64);
  const data::MatchedTargets matched = TargetMatcher(model, tiny_loss())(batch);
  const std::vector<Tensor>& head = model.forward(batch.images_tensor(), Mode::train);
  CHECK(matched.grids == head_grids(head));
  const LevelTargets in_step = head_targets(model, head, batch.labels(), tiny_loss());
  REQUIRE(matched.levels.size() == in_step.size());
  size_t rows = 0;
  for (size_t level = 0; level < in_step.size(); ++level) {
    CAPTURE(level);
    CHECK(same_rows(matched.levels[level], in_step[level]));
    rows += in_step[level].size();
  }
  CHECK(rows > batch.labels().size());  // the neighbour cells too: not an empty match
}

TEST_CASE("a solver step on the loader's matched targets moves the weights as in-step matching") {
  Rng rng(92);
  DetectionModel matching_here = tiny_model(), matched_before = tiny_model();
  const SolverOptions options{
      .epochs = 2, .batches_per_epoch = 4, .batch = 2, .nbs = 2, .loss = tiny_loss()};
  Solver here(matching_here, options), before(matched_before, options);
  const TargetMatcher matcher(matched_before, options.loss);
  for (int64_t iteration = 0; iteration < 3; ++iteration) {
    const data::Batch batch = labelled_batch(rng, 2, 64, 64);
    const data::MatchedTargets matched = matcher(batch);
    const Tensor images = batch.images_tensor();
    const double loss_here = read_loss(here.step(images, batch.labels(), iteration).loss).total;
    const double loss_before =
        read_loss(before.step(images, batch.labels(), iteration, &matched).loss).total;
    CHECK(loss_before == loss_here);
  }
  CHECK(before.arena().values().to_vector<float>() == here.arena().values().to_vector<float>());
  // And the step takes the targets it is given: without level 0's rows the loss is another.
  const data::Batch batch = labelled_batch(rng, 2, 64, 64);
  data::MatchedTargets fewer = matcher(batch);
  REQUIRE_FALSE(fewer.levels[0].empty());
  fewer.levels[0].clear();
  const Tensor images = batch.images_tensor();
  const double loss_fewer =
      read_loss(forward_backward(matched_before, images, batch.labels(), options.loss, {}, &fewer))
          .total;
  CHECK(loss_fewer !=
        read_loss(forward_backward(matched_before, images, batch.labels(), options.loss)).total);
}

TEST_CASE("target matcher refuses sizes no stride divides, and the step grids not the head's") {
  Rng rng(93);
  DetectionModel model = tiny_model();
  const TargetMatcher matcher(model, tiny_loss());
  CHECK_THROWS_WITH_AS(matcher.grids_of(64, 100),
                       "an input of 100x64 is not a multiple of the stride 8; use an image size "
                       "that is",
                       std::invalid_argument);
  // Targets matched to a 128 x 128 input, given with a 64 x 64 one.
  data::Batch batch = labelled_batch(rng, 2, 128, 128);
  const data::MatchedTargets matched = matcher(batch);
  const data::Batch small = labelled_batch(rng, 2, 64, 64);
  CHECK_THROWS_WITH_AS(
      forward_backward(model, small.images_tensor(), small.labels(), tiny_loss(), {}, &matched),
      "targets matched to grids of another size than the input's (the loader's input size must "
      "be the model's input's)",
      std::logic_error);
}
