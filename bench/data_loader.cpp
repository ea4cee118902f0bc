// bench/data_loader.cpp — how fast the loader feeds training batches: augmented mosaic images
// per second for 0 (inline), 1 and 2 worker threads, the one-off verification pass, and the
// label parser on one file of a million rows (half of them duplicates).
// The trainer needs ~30 img/s of 320 mosaics per core to keep a small model busy.
//
//   bench_data_loader [--data coco128/data.yaml] [--imgsz 320] [--batch 16] [--epochs 2] [--quick]
//
// Without --data it uses ../shared/datasets/coco128 if present, else a shapes dataset it
// writes to a temporary folder. Last line: RESULT key=value ...
#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "bench/loader_rate.h"  // defines: BenchDataset, loader_images_per_second
#include "data/dataset.h"
#include "data/label_file.h"
#include "data/verify.h"

using namespace bareyolo;

namespace {

struct Options {
  std::string data;
  int imgsz = 320, batch = 16, epochs = 2;
  bool quick = false;
};

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Seconds to parse one label file of `rows` rows whose second half repeats the first.
double label_parse_seconds(int rows) {
  std::string text;
  for (int i = 0; i < rows; ++i) {
    const int k = i % (rows / 2);
    text += std::to_string(k % 80) + " " + std::to_string(double(k) / rows) + " 0.5 0.01 0.01\n";
  }
  const auto start = std::chrono::steady_clock::now();
  const data::LabelFile parsed = data::parse_labels(text, "bench.txt", 80);
  const double seconds = seconds_since(start);
  if (parsed.boxes.size() != size_t(rows / 2))
    throw std::runtime_error("the label parser kept " + std::to_string(parsed.boxes.size()) +
                             " of " + std::to_string(rows / 2) + " distinct rows");
  return seconds;
}

Options parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&] {
      if (i + 1 >= argc) throw std::invalid_argument(arg + " needs a value");
      return std::string(argv[++i]);
    };
    if (arg == "--data")
      options.data = value();
    else if (arg == "--imgsz")
      options.imgsz = std::stoi(value());
    else if (arg == "--batch")
      options.batch = std::stoi(value());
    else if (arg == "--epochs")
      options.epochs = std::stoi(value());
    else if (arg == "--quick")
      options.quick = true, options.epochs = 1;
    else
      throw std::invalid_argument("unknown argument " + arg);
  }
  return options;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    Options options = parse(argc, argv);
    const bench::BenchDataset bench_data(options.data, BAREYOLO_SOURCE_DIR "/../shared/datasets");
    options.data = bench_data.data_yaml();
    data::DatasetConfig config = data::read_dataset_yaml(options.data);
    data::OpenedSplit train = data::open_split(config, "train");

    auto start = std::chrono::steady_clock::now();
    std::vector<std::string> paths;
    for (const data::ImageRecord& record : train.dataset.records()) paths.push_back(record.path);
    data::SplitReport report = data::verify_images(paths, config.num_classes());
    double verify_per_s = double(report.images.size()) / seconds_since(start);

    std::printf("dataset %s: %s\n", options.data.c_str(), report.summary().c_str());
    std::printf("verification pass: %.0f img/s\n", verify_per_s);
    double rates[3];
    for (int workers = 0; workers <= 2; ++workers) {
      rates[workers] =
          bench::loader_images_per_second(train.dataset, {.imgsz = options.imgsz,
                                                          .batch = options.batch,
                                                          .epochs = options.epochs,
                                                          .workers = workers,
                                                          .max_batches = options.quick ? 2 : 0});
      std::printf("loader, %d worker(s), %dx%d mosaics, batch %d: %.1f img/s\n", workers,
                  options.imgsz, options.imgsz, options.batch, rates[workers]);
    }
    const int label_rows = options.quick ? 100000 : 1000000;
    const double label_seconds = label_parse_seconds(label_rows);
    std::printf("label parser: %d rows in one file (half duplicates) in %.2f s\n", label_rows,
                label_seconds);
    std::printf(
        "RESULT imgsz=%d batch=%d img_per_s_inline=%.1f img_per_s_1worker=%.1f "
        "img_per_s_2workers=%.1f verify_img_per_s=%.0f label_rows_per_s=%.0f\n",
        options.imgsz, options.batch, rates[0], rates[1], rates[2], verify_per_s,
        label_rows / label_seconds);
    return 0;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "bench_data_loader: error: %s\n", error.what());
    return 1;
  }
}
