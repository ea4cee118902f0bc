// docs/examples/train_api.cpp — training through the C++ API, bareyolo::Model (models/api/model.h).
//
//   example_train_api [MODEL_YAML [EPOCHS]]
//
// Builds a model from its yaml, trains it on a small generated shapes dataset with 2 CPU
// ranks (the spawn path: this process forks the workers and waits), printing each epoch's
// metrics from a callback, then saves the best weights and loads them back.
#include <cstdio>
#include <string>

#include "data/shapes.h"
#include "models/api/model.h"

int main(int argc, char** argv) {
  const std::string cfg = argc > 1 ? argv[1] : "models/yolov5n.yaml";
  const int epochs = argc > 2 ? std::stoi(argv[2]) : 3;
  try {
    const std::string data = bareyolo::data::make_shapes_dataset(
        {.out = "datasets/api-shapes", .n_train = 64, .n_val = 16, .imgsz = 64, .classes = 2});

    bareyolo::models::TrainCallbacks report;
    report.on_fit_epoch_end = [](const bareyolo::models::EpochMetrics& m) {
      std::printf("callback: epoch %d  mAP50 %.3f  mAP50-95 %.3f\n", m.epoch + 1, m.map50,
                  m.map50_95);
    };

    bareyolo::Model model(cfg);
    const bareyolo::models::TrainSummary summary = model.train({.data = data,
                                                                .epochs = epochs,
                                                                .batch = 8,
                                                                .imgsz = 64,
                                                                .workers = 1,
                                                                .device = "cpu",
                                                                .nproc_per_node = 2,
                                                                .sync_bn = true,
                                                                .callbacks = {report},
                                                                .show_progress = false,
                                                                .project = "runs/api"});

    model.save("api-trained.safetensors");
    const bareyolo::Model reloaded("api-trained.safetensors");
    std::printf(
        "trained %d epochs in %s; best mAP50 %.3f; the model now holds rank 0's best "
        "weights (%d classes: %s, %s), saved to api-trained.safetensors\n",
        summary.epochs_run, summary.run_dir.c_str(), summary.best_map50,
        reloaded.names().empty() ? 0 : int(reloaded.names().size()), reloaded.names().at(0).c_str(),
        reloaded.names().at(1).c_str());
  } catch (const std::exception& error) {
    std::fprintf(stderr, "error: %s\n", error.what());
    return 1;
  }
  return 0;
}
