// tests/unit/train_loss_reading.cpp — the trainer reads each step's loss one step late (after
// queuing the next step, so that the host never waits for the step it just queued): its running
// means, on_train_batch_end and the epoch's train losses must still be those of reading every
// step's loss at once, in order. A short run records what on_train_batch_end saw, with the batch
// it names; a Solver built as the trainer builds it then replays those batches, reading each
// loss right after its step, and must reproduce every running mean bit for bit.
#include <vector>

#include "data/shapes.h"
#include "engine/shipped_files.h"
#include "models/train/run_model.h"
#include "models/train/solver.h"
#include "models/train/trainer.h"
#include "tests/support/data_fixtures.h"

using namespace bareyolo;
using namespace bareyolo::testing;

namespace {

// What on_train_batch_end saw, and the batch it named (as the model took it).
struct SeenBatch {
  int epoch = 0;
  int64_t batches_done = 0, step = 0;
  std::vector<double> loss_mean;
  Tensor images;
  std::vector<models::LabelRow> labels;
};

}  // namespace

TEST_CASE("the loss read one step late gives the running means of reading it at once") {
  TempDir dir;
  data::make_shapes_dataset({.out = (dir.path() / "shapes").string(),
                             .n_train = 16,
                             .n_val = 4,
                             .imgsz = 64,
                             .classes = 2,
                             .seed = 0});
  models::TrainOptions options;
  options.data = (dir.path() / "shapes" / "data.yaml").string();
  options.cfg = shipped_file("models/yolov5-tiny.yaml");
  options.run_dir = (dir.path() / "run").string();
  options.epochs = 2;
  options.batch = 4;  // 4 batches per epoch
  options.nbs = 8;    // updates every batch, then every second batch after the warm-up
  options.imgsz = 64;
  options.workers = 2;
  options.validate = false;
  options.show_progress = false;
  options.plots = false;
  options.autoanchor = false;  // the replay's model starts from the same anchors
  std::vector<SeenBatch> seen;
  std::vector<std::vector<double>> epoch_means;  // train box, obj, cls of each epoch
  models::TrainCallbacks recorder;
  recorder.on_train_batch_end = [&](const models::BatchEndInfo& info) {
    seen.push_back({info.epoch,
                    info.batches_done,
                    info.batch->step,
                    {info.loss_mean[0], info.loss_mean[1], info.loss_mean[2]},
                    info.batch->images_tensor(),
                    info.batch->labels()});
  };
  recorder.on_fit_epoch_end = [&](const models::EpochMetrics& m) {
    epoch_means.push_back({m.train_box, m.train_obj, m.train_cls});
  };
  options.callbacks = {recorder};
  const models::TrainSummary summary = models::train(options, [](const std::string&) {});
  REQUIRE(summary.finished);
  REQUIRE(seen.size() == 8);
  REQUIRE(epoch_means.size() == 2);

  // The replay: the trainer's model and Solver, each loss read right after its step.
  const int batches_per_epoch = 4, classes = 2;
  models::DetectionModel model(models::run_model_config(options),
                               {.nc = classes, .seed = options.seed});
  models::Solver solver(
      model,
      {.optimizer = options.optimizer,
       .schedule = options.schedule,
       .weight_decay = options.weight_decay,
       .epochs = options.epochs,
       .batches_per_epoch = batches_per_epoch,
       .batch = options.batch,
       .nbs = options.nbs,
       .loss = {models::scale_loss_gains(options.loss, model.num_levels(), classes, 64), classes}});
  double means[3] = {0, 0, 0};
  int64_t batches_done = 0;
  for (size_t k = 0; k < seen.size(); ++k) {
    const SeenBatch& batch = seen[k];
    CAPTURE(k);
    if (k == 0 || batch.epoch != seen[k - 1].epoch) {  // the trainer's epoch start
      solver.drop_accumulation();
      batches_done = 0;
      means[0] = means[1] = means[2] = 0;
    }
    const models::StepOutcome step =
        solver.step(batch.images, batch.labels, batch.step + batches_per_epoch * batch.epoch);
    const models::LossValues loss = models::read_loss(step.loss);
    const double items[3] = {loss.box, loss.obj, loss.cls};
    ++batches_done;
    for (int i = 0; i < 3; ++i) means[i] += (items[i] - means[i]) / double(batches_done);
    CHECK(batch.batches_done == batches_done);
    CHECK(batch.loss_mean == std::vector<double>(means, means + 3));  // bit for bit
    const bool epoch_ends = k + 1 == seen.size() || seen[k + 1].epoch != batch.epoch;
    if (epoch_ends)
      CHECK(epoch_means.at(size_t(batch.epoch)) == std::vector<double>(means, means + 3));
  }
  CHECK(means[0] > 0);
}
