// tools/bareyolo/data_commands.cpp — make-shapes, data-check and show-batch (see data_commands.h).
#include "tools/bareyolo/data_commands.h"

#include <cstdio>
#include <string>

#include "data/dataset.h"       // defines: open_split, Dataset
#include "data/dataset_yaml.h"  // defines: read_dataset_yaml
#include "data/label_cache.h"   // defines: load_or_build_split
#include "data/loader.h"        // defines: Loader
#include "data/preview.h"       // defines: render_batch
#include "data/sampler.h"       // defines: DistributedSampler
#include "data/shapes.h"        // defines: make_shapes_dataset
#include "tools/bareyolo/max_pixels_option.h"
#include "tools/bareyolo/validators.h"

namespace bareyolo {

namespace {

struct ShowBatchOptions {
  std::string data, out = "batch.jpg";
  int imgsz = 640, batch = 16, epoch = 0, workers = 0;
  uint64_t seed = 0;
};

data::ShapesOptions shapes_options;
std::string check_data;
int64_t check_max_pixels = data::kDefaultMaxPixels;
ShowBatchOptions show_options;

int make_shapes() {
  std::string yaml = data::make_shapes_dataset(shapes_options);
  std::printf("wrote %d train and %d val images (%d classes, %dx%d) and %s\n",
              shapes_options.n_train, shapes_options.n_val, shapes_options.classes,
              shapes_options.imgsz, shapes_options.imgsz, yaml.c_str());
  return 0;
}

// Prints each split's summary and problems; exit code 1 when any image had to be skipped or
// the training split cannot be trained on (no usable image, no label).
int data_check() {
  data::DatasetConfig config = data::read_dataset_yaml(check_data);
  std::printf("%s: %d classes, root %s\n", check_data.c_str(), config.num_classes(),
              config.root.c_str());
  int skipped = 0;
  bool untrainable = false;
  for (const char* split : {"train", "val", "test"}) {
    const std::vector<std::string>& sources = data::split_sources(config, split);
    if (sources.empty()) continue;
    data::CachedSplit verified =
        data::load_or_build_split(sources, config.num_classes(), check_max_pixels);
    for (const data::Problem& problem : verified.report.problems)
      std::printf("  %s\n", problem.to_string().c_str());
    for (const std::string& note : verified.notes) std::printf("  note: %s\n", note.c_str());
    std::printf("%s: %s%s\n", split, verified.report.summary().c_str(),
                verified.from_cache ? " (from cache)" : "");
    skipped += verified.report.corrupt;
    if (std::string(split) != "train") continue;
    if (verified.report.images.empty()) {
      std::printf("error: no usable training image\n");
      return 1;
    }
    if (data::no_labels_problem(verified.report)) {
      std::printf("error: the train split has no labels (above): training refuses it\n");
      untrainable = true;
    }
  }
  return skipped > 0 || untrainable ? 1 : 0;
}

int show_batch() {
  data::DatasetConfig config = data::read_dataset_yaml(show_options.data);
  data::OpenedSplit train = data::open_split(config, "train");
  data::SamplerOptions sampler_options;
  sampler_options.dataset_size = train.dataset.size();
  sampler_options.global_batch = show_options.batch;
  sampler_options.seed = show_options.seed;
  data::DistributedSampler sampler(sampler_options);
  data::LoaderOptions loader_options;
  loader_options.imgsz = show_options.imgsz;
  loader_options.seed = show_options.seed;
  loader_options.workers = show_options.workers;
  std::vector<data::Step> plan = sampler.plan_epoch(show_options.epoch, show_options.imgsz);
  plan.resize(1);
  data::Loader loader(train.dataset, plan, show_options.epoch, loader_options);
  data::Batch batch = *loader.next();
  data::write_image(show_options.out, data::render_batch(batch, config.names));
  std::printf("wrote %s: %d augmented training images, %lld boxes (epoch %d, step 0)\n",
              show_options.out.c_str(), batch.size, static_cast<long long>(batch.num_targets()),
              show_options.epoch);
  return 0;
}

}  // namespace

void add_data_commands(CLI::App& app) {
  CLI::App* shapes = app.add_subcommand(
      "make-shapes", "Write the built-in synthetic shapes dataset (images, labels, data.yaml)");
  shapes->add_option("--out", shapes_options.out, "Output folder")->required();
  shapes->add_option("--n-train", shapes_options.n_train, "Training images")->check(cli::kPositive);
  shapes->add_option("--n-val", shapes_options.n_val, "Validation images")->check(cli::kPositive);
  shapes->add_option("--imgsz", shapes_options.imgsz, "Image side in pixels")
      ->check(CLI::Range(32, 4096));
  shapes->add_option("--classes", shapes_options.classes, "Number of shape classes")
      ->check(CLI::Range(1, int(data::shape_class_names().size())));
  shapes->add_option("--seed", shapes_options.seed, "Random seed")->check(cli::kNonNegative);

  CLI::App* check = app.add_subcommand(
      "data-check", "Verify a dataset's images and labels; print the summary and every problem");
  check->add_option("--data", check_data, "Dataset yaml")->required();
  cli::add_max_pixels_option(check, check_max_pixels);

  CLI::App* show = app.add_subcommand(
      "show-batch", "Draw one augmented training batch with its boxes into an image file");
  show->add_option("--data", show_options.data, "Dataset yaml")->required();
  show->add_option("--out", show_options.out, "Output .jpg or .png");
  show->add_option("--imgsz", show_options.imgsz, "Image side in pixels")
      ->check(CLI::Range(32, 4096));
  show->add_option("--batch", show_options.batch, "Images in the grid")->check(CLI::Range(1, 256));
  show->add_option("--epoch", show_options.epoch, "Epoch (changes the augmentation)");
  show->add_option("--seed", show_options.seed, "Random seed")->check(cli::kNonNegative);
  show->add_option("--workers", show_options.workers, "Loader threads")->check(cli::kNonNegative);
}

std::optional<int> run_data_command(const CLI::App& app) {
  if (app.got_subcommand("make-shapes")) return make_shapes();
  if (app.got_subcommand("data-check")) return data_check();
  if (app.got_subcommand("show-batch")) return show_batch();
  return std::nullopt;
}

}  // namespace bareyolo
