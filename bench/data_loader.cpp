// bench/data_loader.cpp — the input pipeline per CPU-second, like against like: augmented
// training images (mosaics, hyp.scratch-low) per CPU-second (getrusage of the process and its
// reaped children, so threads and worker processes compare fairly) for bareyolo's loader
// without and with its decoded-image cache (`--cache ram`), and for PyTorch YOLOv5's own
// LoadImagesAndLabels with the same hyp and workers, uncached and with cache_images='ram',
// taken in turns; then the cache's PSS with 2 ranks against 1 (bench/cache_pss.h); the
// verification pass and the label parser on one file of a million rows; and where a sample's
// CPU time goes in each loader, stage by stage, on one thread (bench/stage_breakdown.h; 128
// uncached samples, 16 with --quick).
//
//   bench_data_loader [--data coco128/data.yaml] [--imgsz 640] [--batch 16] [--workers 2]
//                     [--epochs 1] [--rounds 1] [--quick]
//
// Without --data: ../shared/datasets/coco128 if present, else generated shapes. YOLOv5 runs
// when $YOLOV5_DIR names it (a release tree such as v7.0's, or the pip package's folder) and a
// Python imports torch and cv2 and, from that folder, YOLOv5's utils.dataloaders (find_yolov5:
// YOLOv5's requirements too); else the RESULT line says yolov5=absent, why, and gives no ratio.
// With --rounds N each configuration runs N times, in turns, and its best rate counts (the others
// were disturbed by something else on the machine). Last line:
//   RESULT ours_img_per_cpu_s=<x> yolov5_img_per_cpu_s=<y> ratio=<x/y> cached_ratio=<xc/yc>
//          cache_pss_ratio=<p> first_batch_speedup=<s>
// (s: an epoch's first batch on one thread over on --workers threads; ideally the worker
// count, where that many cores are free.)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/cache_pss.h"        // defines: measure_cache_pss
#include "bench/loader_rate.h"      // defines: BenchDataset, measure_loader
#include "bench/python_peer.h"      // defines: find_yolov5
#include "bench/stage_breakdown.h"  // defines: StageBreakdown, print_stage_table
#include "data/dataset.h"
#include "data/label_file.h"
#include "data/verify.h"

using namespace bareyolo;

namespace {

struct Options {
  std::string data;
  int imgsz = 640, batch = 16, workers = 2, epochs = 1, rounds = 1;
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
      return std::stoi(argv[++i]);
    };
    if (arg == "--data" && i + 1 < argc)
      options.data = argv[++i];
    else if (arg == "--imgsz")
      options.imgsz = value();
    else if (arg == "--batch")
      options.batch = value();
    else if (arg == "--workers")
      options.workers = value();
    else if (arg == "--epochs")
      options.epochs = value();
    else if (arg == "--rounds")
      options.rounds = value();
    else if (arg == "--quick")
      options.quick = true;
    else
      throw std::invalid_argument("unknown argument " + arg);
  }
  return options;
}

// YOLOv5's loader on the train split's images, through bench/yolov5_loader.py; nothing when
// torch, cv2 or $YOLOV5_DIR is missing.
class Yolov5Peer {
 public:
  Yolov5Peer(const Options& options, std::string images)
      : options_(options),
        images_(images),
        yolov5_(bench::find_yolov5("torch, cv2", "utils.dataloaders")) {}
  bool present() const { return yolov5_.present(); }
  const std::string& why_absent() const { return yolov5_.why_absent; }

  // Images per CPU-second of one run, uncached or with cache_images='ram'.
  double images_per_cpu_second(bool cached) const {
    long images = 0;
    double cpu_s = 0, wall_s = 0;
    bool found = false;
    for (const std::string& line : output_lines(
             std::string("--workers ") + std::to_string(options_.workers) + " --epochs " +
             std::to_string(options_.epochs) + " --max-batches " +
             std::to_string(options_.quick ? 2 : 0) + " --cache " + (cached ? "ram" : "none")))
      found = found || std::sscanf(line.c_str(), "YOLOV5 images=%ld cpu_s=%lf wall_s=%lf", &images,
                                   &cpu_s, &wall_s) == 3;
    if (!found || cpu_s <= 0) throw std::runtime_error("YOLOv5's loader printed no rate");
    std::printf("yolov5 %s: %ld images, %.1f img/s, %.1f img/CPU-s\n",
                cached ? "cache=ram" : "uncached", images, images / wall_s, images / cpu_s);
    return images / cpu_s;
  }

  // Where the CPU time of `samples` uncached samples goes, built on one thread.
  bench::StageBreakdown stages(int samples) const {
    for (const std::string& line :
         output_lines("--stages --samples " + std::to_string(samples) + " --cache none"))
      if (const std::optional<bench::StageBreakdown> breakdown = bench::parse_yolov5_stages(line))
        return *breakdown;
    throw std::runtime_error("YOLOv5's loader printed no YOLOV5_STAGES line");
  }

 private:
  // The lines bench/yolov5_loader.py prints on the train split's images at the bench's size
  // and batch, with `arguments` after; throws when it fails.
  std::vector<std::string> output_lines(const std::string& arguments) const {
    const std::string command =
        yolov5_.python + " " BAREYOLO_SOURCE_DIR "/bench/yolov5_loader.py --images '" + images_ +
        "' --imgsz " + std::to_string(options_.imgsz) + " --batch " +
        std::to_string(options_.batch) + " " + arguments + " 2>/dev/null";
    FILE* output = ::popen(command.c_str(), "r");
    if (!output) throw std::runtime_error("cannot run " + command);
    std::vector<std::string> lines;
    char line[1024];
    while (std::fgets(line, sizeof line, output)) lines.push_back(line);
    if (::pclose(output) != 0) throw std::runtime_error("YOLOv5's loader failed: " + command);
    return lines;
  }

  Options options_;
  std::string images_;
  bench::Yolov5Install yolov5_;
};

// Where the CPU time of `samples` uncached samples of ours goes, built on one thread (the
// loader without workers, the stage clock of data/stage_clock.h), as the peer measures its own.
bench::StageBreakdown our_stages(const data::Dataset& dataset, bench::LoaderRateOptions rate,
                                 int samples) {
  rate.workers = 0, rate.epochs = 1, rate.max_batches = std::max(1, samples / rate.batch);
  const bench::LoaderRate measured = bench::measure_loader(dataset, rate);
  const double ms = 1e3 / double(measured.images);
  bench::StageBreakdown ours;
  ours.samples = long(measured.images);
  ours.decode_ms = measured.stages[data::Stage::decode] * ms;
  ours.resize_ms = measured.stages[data::Stage::resize] * ms;
  ours.place_ms = measured.stages[data::Stage::place] * ms;
  ours.warp_ms = measured.stages[data::Stage::warp] * ms;  // the flips folded in
  ours.hsv_ms = measured.stages[data::Stage::hsv] * ms;
  ours.batch_ms = measured.stages[data::Stage::batch] * ms;
  ours.total_ms = measured.cpu_seconds * ms;
  return ours;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    Options options = parse(argc, argv);
    const bench::BenchDataset bench_data(options.data, BAREYOLO_SOURCE_DIR "/../shared/datasets");
    options.data = bench_data.data_yaml();
    data::DatasetConfig config = data::read_dataset_yaml(options.data);
    data::OpenedSplit train = data::open_split(config, "train");
    const std::vector<data::ImageRecord>& records = train.dataset.records();
    const data::ImageCacheRequest ram{.mode = data::CacheMode::ram,
                                      .imgsz = options.imgsz,
                                      .label_cache_file = train.verification.cache_file};

    // Forks first, while no thread runs.
    const bench::CachePss pss = bench::measure_cache_pss(records, ram);
    std::printf("cache PSS: 1 rank %ld kB, 2 ranks %ld kB in all (ratio %.3f)\n", pss.alone_kb,
                pss.two_ranks_kb, pss.ratio());

    auto start = std::chrono::steady_clock::now();
    std::vector<std::string> paths;
    for (const data::ImageRecord& record : records) paths.push_back(record.path);
    data::SplitReport report = data::verify_images(paths, config.num_classes());
    double verify_per_s = double(report.images.size()) / seconds_since(start);
    std::printf("dataset %s: %s\n", options.data.c_str(), report.summary().c_str());
    std::printf("verification pass: %.0f img/s\n", verify_per_s);

    data::Dataset cached = train.dataset;
    std::vector<std::string> notes;
    cached.use_cache(data::open_image_cache(records, ram, notes));
    for (const std::string& note : notes) std::printf("%s\n", note.c_str());

    const Yolov5Peer yolov5(options, split_sources(config, "train").front());
    if (!yolov5.present()) std::printf("yolov5: absent (%s)\n", yolov5.why_absent().c_str());
    const bench::LoaderRateOptions rate{.imgsz = options.imgsz,
                                        .batch = options.batch,
                                        .epochs = options.epochs,
                                        .workers = options.workers,
                                        .max_batches = options.quick ? 2 : 0};
    auto ours = [&](const data::Dataset& dataset, const char* what) {
      const bench::LoaderRate r = bench::measure_loader(dataset, rate);
      std::printf("ours %s: %lld images, %d workers, %dx%d mosaics, %.1f img/s, %.1f img/CPU-s\n",
                  what, static_cast<long long>(r.images), options.workers, options.imgsz,
                  options.imgsz, r.per_second(), r.per_cpu_second());
      return r.per_cpu_second();
    };
    double best[4] = {0, 0, 0, 0};  // ours, yolov5, ours cached, yolov5 cached
    for (int round = 0; round < options.rounds; ++round) {
      best[0] = std::max(best[0], ours(train.dataset, "uncached"));
      if (yolov5.present()) best[1] = std::max(best[1], yolov5.images_per_cpu_second(false));
      best[2] = std::max(best[2], ours(cached, "cache=ram"));
      if (yolov5.present()) best[3] = std::max(best[3], yolov5.images_per_cpu_second(true));
    }

    // An epoch's first batch with the workers against one thread building it alone: the
    // workers share a batch's samples, so the wait at an epoch's start shrinks with them.
    bench::LoaderRateOptions one_batch = rate;
    one_batch.max_batches = 1;
    double alone = 1e30, shared = 1e30;
    for (int round = 0; round < std::max(options.rounds, 2); ++round) {
      one_batch.workers = 0;
      alone = std::min(alone, bench::first_batch_seconds(train.dataset, one_batch));
      one_batch.workers = options.workers;
      shared = std::min(shared, bench::first_batch_seconds(train.dataset, one_batch));
    }
    const double first_batch_speedup = alone / shared;
    std::printf(
        "first batch of an epoch (batch %d): %.3f s on one thread, %.3f s on %d workers "
        "(%.2fx)\n",
        options.batch, alone, shared, options.workers, first_batch_speedup);

    const int label_rows = options.quick ? 100000 : 1000000;
    const double label_seconds = label_parse_seconds(label_rows);
    std::printf("label parser: %d rows in one file (half duplicates), %.0f rows/s\n", label_rows,
                label_rows / label_seconds);
    // The loaders' stages on one thread, then what each costs a training image through its
    // loader (workers included: the rest is the loader's own overhead).
    const int stage_samples = options.quick ? 16 : 128;
    std::optional<bench::StageBreakdown> yolov5_stages;
    if (yolov5.present()) yolov5_stages = yolov5.stages(stage_samples);
    bench::print_stage_table(our_stages(train.dataset, rate, stage_samples), yolov5_stages);
    std::printf("through the loaders (%d workers, uncached), CPU ms per image: ours %.3f",
                options.workers, 1000 / best[0]);
    if (yolov5.present()) std::printf(", yolov5 %.3f", 1000 / best[1]);
    std::printf("\n");

    if (yolov5.present())
      std::printf(
          "RESULT ours_img_per_cpu_s=%.2f yolov5_img_per_cpu_s=%.2f ratio=%.3f "
          "cached_ratio=%.3f cache_pss_ratio=%.3f first_batch_speedup=%.2f\n",
          best[0], best[1], best[0] / best[1], best[2] / best[3], pss.ratio(), first_batch_speedup);
    else
      std::printf(
          "RESULT ours_img_per_cpu_s=%.2f ours_cached_img_per_cpu_s=%.2f yolov5=absent "
          "cache_pss_ratio=%.3f first_batch_speedup=%.2f\n",
          best[0], best[2], pss.ratio(), first_batch_speedup);
    return 0;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "bench_data_loader: error: %s\n", error.what());
    return 1;
  }
}
