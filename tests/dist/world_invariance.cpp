// tests/dist/world_invariance.cpp — the invariant data parallelism must keep: 2 ranks x 2
// images train exactly like 1 rank x 4 images (SyncBN, global loss normalisation, averaged
// gradients), here for three SGD steps of the tiny model, with one rank's micro-batch holding
// every label and the other none; at one input shape, and at a shape that changes every step
// (--rect, --multi-scale: the graph re-plans, larger after smaller, and SyncBN's counts change).
// The changing shapes run in double: then the two runs agree to rounding in the 15th digit
// (measured 1.1e-11 element-wise), so any difference in what they compute shows, where float
// rounding alone moves a small weight by a few thousandths of its size. The trainer-level tests
// (tests/dist/train.cpp, tests/shell/train_ddp.sh) repeat it with real data, augmentation and
// accumulation.
#include <array>

#include "engine/distributed/ddp/data_parallel.h"
#include "engine/distributed/ddp/reducer.h"
#include "engine/optim/clip.h"
#include "engine/optim/sgd.h"
#include "engine/parameter_arena.h"
#include "engine/shipped_files.h"
#include "models/train/step.h"
#include "tests/support/dist_testing.h"
#include "tests/support/testing.h"

using namespace bareyolo;
using namespace bareyolo::models;
using namespace bareyolo::dist;
using namespace bareyolo::dist::testing;

namespace {

constexpr int kBatch = 4, kSteps = 3;

DetectionModel tiny_model(DType dtype) {
  return DetectionModel(load_model_config(shipped_file("models/yolov5-tiny.yaml")),
                        {.nc = 2, .seed = 11, .dtype = dtype});
}

// Every step's input height and width.
struct StepShape {
  int height = 64, width = 64;
};
using Shapes = std::array<StepShape, kSteps>;

// Step s's batch: random images; labels on images 0 and 1 only (rank 0's half).
Tensor batch_images(int step, StepShape shape, DType dtype) {
  bareyolo::testing::Rng rng(500 + uint64_t(step));
  const std::vector<float> values =
      bareyolo::testing::random_vector<float>(rng, kBatch * 3 * shape.height * shape.width, 0, 1);
  const Shape4 batch{kBatch, 3, shape.height, shape.width};
  if (dtype == DType::f64)
    return Tensor::from_vector(std::vector<double>(values.begin(), values.end()), batch);
  return Tensor::from_vector(values, batch);
}
std::vector<LabelRow> batch_labels(int first_image, int images) {
  const std::vector<LabelRow> all = {{0, 0, 0.3f, 0.4f, 0.2f, 0.3f},
                                     {0, 1, 0.7f, 0.6f, 0.3f, 0.2f},
                                     {1, 1, 0.5f, 0.5f, 0.4f, 0.5f}};
  std::vector<LabelRow> mine;
  for (LabelRow row : all)
    if (row.image >= first_image && row.image < first_image + images) {
      row.image -= first_image;
      mine.push_back(row);
    }
  return mine;
}

// kSteps SGD steps on micro-batches [first, first + images) of each step's batch.
std::vector<std::vector<double>> train(DetectionModel& model, ParameterArena& arena, int first,
                                       int images, const DataParallel& parallel,
                                       const Shapes& shapes, DType dtype) {
  const LossOptions options{scale_loss_gains({}, 3, 2, 64), 2};
  std::vector<StateEntry> state = model.state();
  Sgd sgd(arena, 0.01, 0.9, 5e-4);
  for (int step = 0; step < kSteps; ++step) {
    const Tensor images_of_step = batch_images(step, shapes[size_t(step)], dtype)
                                      .images(first, first + images)
                                      .to(Device::cpu());
    forward_backward(model, images_of_step, batch_labels(first, images), options, parallel);
    if (parallel.reducer) parallel.reducer->finish();
    clip_gradient_norm(arena, 10.0);
    sgd.step();
    sgd.zero_grad();
  }
  std::vector<std::vector<double>> values;
  for (const StateEntry& e : state) values.push_back(e.value->to_doubles());
  return values;
}

// Runs both: 1 rank x 4 images and 2 ranks x 2 in `dtype`, and compares their parameters
// element-wise, |got - want| / (1e-3 + |want|) within `tolerance`.
void check_two_ranks_train_like_one(const Shapes& shapes, DType dtype, double tolerance) {
  check_ranks_ok(run_ranks(
      2,
      [&](ProcessGroup& group) {
        DetectionModel single = tiny_model(dtype);
        ParameterArena single_arena(single.state());
        const std::vector<std::vector<double>> want =
            train(single, single_arena, 0, kBatch, {}, shapes, dtype);

        DetectionModel model = tiny_model(dtype);
        dist::sync_batchnorm(model.graph(), group.comm.get());
        ParameterArena arena(model.state());
        Reducer reducer(arena, model.graph(), *group.comm);
        const int half = kBatch / 2;
        const std::vector<std::vector<double>> got = train(
            model, arena, group.rank() * half, half, {group.comm.get(), &reducer}, shapes, dtype);

        const std::vector<StateEntry> names = model.state();
        double worst = 0;
        std::string where;
        for (size_t p = 0; p < want.size(); ++p)
          for (size_t k = 0; k < want[p].size(); ++k) {
            const double error = std::abs(got[p][k] - want[p][k]) / (1e-3 + std::abs(want[p][k]));
            if (error > worst) {
              worst = error;
              where = names[p].name + "[" + std::to_string(k) + "]";
            }
          }
        std::printf("rank %d: largest relative difference %.3g at %s\n", group.rank(), worst,
                    where.c_str());
        if (worst > tolerance)
          throw std::runtime_error(
              "parameters differ from the one-rank run: " + std::to_string(worst) + " at " + where);
      },
      std::chrono::seconds(120)));
}

}  // namespace

TEST_CASE("2 ranks x 2 images with SyncBN train like 1 rank x 4 images") {
  check_two_ranks_train_like_one({}, DType::f32, 1e-3);
}

TEST_CASE("2 ranks x 2 images train like 1 rank x 4 at a shape that changes every step") {
  check_two_ranks_train_like_one({{{64, 96}, {128, 96}, {64, 64}}}, DType::f64, 1e-9);
}
