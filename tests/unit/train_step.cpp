// tests/unit/train_step.cpp — the recipe's pieces working together: repeated SGD steps on one
// fixed batch (no augmentation) must drive YOLOv5's loss down, as a model that can learn does.
#include "engine/optim/clip.h"
#include "engine/optim/sgd.h"
#include "engine/parameter_arena.h"
#include "engine/shipped_files.h"
#include "models/loss/head_loss.h"
#include "tests/support/testing.h"

using namespace bareyolo;
using namespace bareyolo::models;
using namespace bareyolo::testing;

TEST_CASE("training steps on one fixed batch lower the loss") {
  DetectionModel model(load_model_config(shipped_file("models/yolov5-tiny.yaml")),
                       {.nc = 2, .seed = 3});
  Rng rng(131);
  const Tensor images =
      Tensor::from_vector(random_vector<float>(rng, 4 * 3 * 64 * 64, 0, 1), {4, 3, 64, 64});
  const std::vector<LabelRow> labels = {{0, 0, 0.3f, 0.4f, 0.2f, 0.3f},
                                        {1, 1, 0.6f, 0.5f, 0.4f, 0.2f},
                                        {2, 0, 0.5f, 0.5f, 0.5f, 0.5f},
                                        {3, 1, 0.2f, 0.8f, 0.15f, 0.2f}};
  const LossOptions options{scale_loss_gains({}, 3, 2, 64), 2};
  ParameterArena arena(model.state());
  Sgd sgd(arena, 0.01, 0.9, 5e-4);

  auto step = [&] {
    const HeadLoss loss = head_loss(model, model.forward(images, Mode::train), labels, options, 4);
    model.backward(loss.gradients);
    clip_gradient_norm(arena, 10.0);
    sgd.step();
    sgd.zero_grad();
    return read_loss(loss.loss).total;
  };
  const double first = step();
  double last = first;
  for (int k = 0; k < 80; ++k) last = step();
  CHECK(last < 0.65 * first);  // measured here: 0.63 -> 0.35 (a wrong gradient sign climbs)
}
