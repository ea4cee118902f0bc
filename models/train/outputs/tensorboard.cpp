// models/train/outputs/tensorboard.cpp — see tensorboard.h.
#include "models/train/outputs/tensorboard.h"

#include <unistd.h>

#include <filesystem>
#include <memory>

#include "engine/tfevents.h"

namespace bareyolo::models {

std::vector<std::pair<std::string, float>> tensorboard_scalars(const EpochMetrics& m) {
  std::vector<std::pair<std::string, float>> scalars = {{"train/box_loss", float(m.train_box)},
                                                        {"train/obj_loss", float(m.train_obj)},
                                                        {"train/cls_loss", float(m.train_cls)},
                                                        {"x/lr0", float(m.lr0)},
                                                        {"x/lr1", float(m.lr1)},
                                                        {"x/lr2", float(m.lr2)}};
  if (m.validated)
    scalars.insert(scalars.end(), {{"metrics/precision", float(m.precision)},
                                   {"metrics/recall", float(m.recall)},
                                   {"metrics/mAP_0.5", float(m.map50)},
                                   {"metrics/mAP_0.5:0.95", float(m.map50_95)},
                                   {"val/box_loss", float(m.val_box)},
                                   {"val/obj_loss", float(m.val_obj)},
                                   {"val/cls_loss", float(m.val_cls)}});
  return scalars;
}

TrainCallbacks tensorboard_writer() {
  auto file = std::make_shared<std::unique_ptr<EventsFile>>();
  TrainCallbacks callbacks;
  callbacks.on_train_start = [file](const TrainStartInfo& run) {
    char host[256] = "localhost";
    gethostname(host, sizeof host - 1);
    const std::string name = "events.out.tfevents." + std::to_string(int64_t(wall_time_now())) +
                             "." + host + "." + std::to_string(::getpid());
    *file = std::make_unique<EventsFile>((std::filesystem::path(run.run_dir) / name).string());
  };
  callbacks.on_fit_epoch_end = [file](const EpochMetrics& m) {
    (*file)->add_scalars(m.epoch, tensorboard_scalars(m));
  };
  callbacks.on_train_end = [file](const TrainEndInfo&) { file->reset(); };  // closes it
  return callbacks;
}

}  // namespace bareyolo::models
