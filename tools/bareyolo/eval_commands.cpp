// tools/bareyolo/eval_commands.cpp — `val` and `predict` (see eval_commands.h). The work is in
// models/eval/validate.h, models/eval/decode.h and models/eval/nms.h; this file reads the command
// line, the files, and prints or writes the results.
//
// val draws YOLOv5's pictures of a validation (models/eval/plots.h) into <project>/<name>
// (runs/val/exp, exp2, ...), as val.py does; --noplots writes neither them nor the folder.
// Both commands end with YOLOv5's Speed: line (models/eval/speed.h).
//
// COCO results JSON (--save-json, and predict's detections.json): one object per detection,
// {"image_id", "category_id", "bbox": [x, y, w, h] in original-image pixels, "score"}, as
// YOLOv5's val writes it; image_id is the file's stem as a number when it is one (COCO's
// ids), else the stem; category_id is the class index (YOLOv5 maps COCO's 80 classes to
// its 91 ids only for COCO itself; do that mapping yourself for pycocotools on COCO).
//
// predict writes into one folder, as detect.py does: <project>/<name> (runs/predict/exp, exp2,
// ...; --exist-ok reuses exp), or --out exactly as given (no numbering: for scripts). It draws
// each image there at its path relative to a --source folder (a/x.png -> a/x.jpg), so that two
// subfolders' x.jpg keep their own copies, and names it in detections.json by that path without
// its extension ("a/x"; a flat folder's ids are stems, as val's). Before anything is written it
// refuses an output that would land on an input (--out set to --source) and two images that
// would be drawn to one file (a/x.png and a/x.jpg).
//
// predict --save-raw FILE: a safetensors file with, for the k-th image read, `input.k` (the
// letterboxed network input, [1, 3, H, W]), `output.k` (the decoded rows before NMS,
// [1, rows, 5 + nc]: what an exported ONNX graph outputs), `letterbox.k` (gain, pad x, pad y,
// original width and height) and the metadata `image.k` (its path): to hold another runtime's
// outputs against bareyolo's on the very same input.
#include "tools/bareyolo/eval_commands.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "data/image_files.h"
#include "data/letterbox.h"
#include "data/preview.h"
#include "engine/safetensors.h"
#include "models/eval/decode.h"
#include "models/eval/detection_crop.h"
#include "models/eval/image_prediction.h"
#include "models/eval/plots.h"
#include "models/eval/speed.h"
#include "models/eval/validate.h"
#include "models/train/run_dir.h"
#include "models/yolo/weights.h"
#include "tools/bareyolo/device_option.h"
#include "tools/bareyolo/max_pixels_option.h"
#include "tools/bareyolo/output_paths.h"
#include "tools/bareyolo/validators.h"
#include "tools/bareyolo/yolov5_flags.h"

namespace bareyolo {

namespace {

namespace fs = std::filesystem;

// Where a command writes: <project>/<name>, numbered as YOLOv5's val.py and detect.py number
// their folders (exp, exp2, ...; exist_ok reuses <name>).
struct OutputFolder {
  std::string project, name = "exp";
  bool exist_ok = false;
};

struct EvalOptions {
  std::string cfg, weights, data, split = "val", task, save_json, source, out, names, save_raw;
  int imgsz = 640, batch = 32, workers = 0;
  float conf = -1, iou = -1;  // -1: the command's default
  int64_t max_pixels = data::kDefaultMaxPixels;
  bool no_rect = false, single_cls = false;
  // val's pictures (models/eval/plots.h; --noplots: none) and predict's outputs.
  OutputFolder val_folder{.project = "runs/val"}, predict_folder{.project = "runs/predict"};
  bool no_plots = false;
  // predict as detect.py: what it writes and how it draws.
  bool save_txt = false, save_conf = false, save_crop = false, no_save = false, hide_labels = false,
       hide_conf = false;
  std::vector<int> classes;
  int max_det = 300, line_thickness = 2;
  DeviceOption device;
} options;

// A model with `nc` classes holding `weights` (read from --weights), on --device; built from
// --cfg, else from the yaml the weights carry.
models::DetectionModel load_model(const SafetensorsFile& weights, int nc) {
  models::DetectionModel model(models::weights_model_config(weights, options.weights, options.cfg),
                               {.nc = nc, .device = options.device.resolve()});
  models::load_state(weights, model.state(), options.weights);
  return model;
}

// --imgsz rounded up to the model's largest stride, as YOLOv5's val and detect do, saying so.
int inference_size(const models::DetectionModel& model) {
  std::string note;
  const int size =
      models::stride_multiple_size(options.imgsz, int(model.strides().back()), 0, &note);
  if (!note.empty()) std::printf("warning: %s\n", note.c_str());
  return size;
}

// `image_name` is the image's file name without its extension (its path below the source
// folder, for predict's subfolders).
nlohmann::json coco_detection(const std::string& image_name, const models::Detection& d) {
  // COCO's image ids are numbers: a numeric file name becomes one, unless it is too long for
  // an int64 (then the name stays a string, as any other name does).
  const std::string& stem = image_name;
  int64_t number = 0;
  const auto [end, error] = std::from_chars(stem.data(), stem.data() + stem.size(), number);
  const bool numeric = !stem.empty() && error == std::errc() && end == stem.data() + stem.size() &&
                       stem.find_first_not_of("0123456789") == std::string::npos;
  nlohmann::json image_id = numeric ? nlohmann::json(number) : nlohmann::json(stem);
  return {{"image_id", image_id},
          {"category_id", d.class_id},
          {"bbox", {d.box.x1, d.box.y1, d.box.x2 - d.box.x1, d.box.y2 - d.box.y1}},
          {"score", d.conf}};
}

void write_json(const std::string& path, const nlohmann::json& json) {
  std::ofstream out(path);
  out << json.dump() << "\n";
  if (!out) throw std::runtime_error("cannot write " + path);
}

// val --task, as val.py's: train, val or test names the split; speed validates the val split
// at val.py's benchmark settings (conf 0.25, IoU 0.45, square batches, no JSON, no pictures)
// for its Speed: line. val.py overrides a --conf-thres given with it; bareyolo refuses it.
void apply_val_task() {
  if (options.task.empty()) return;
  if (options.task != "speed") {
    options.split = options.task;
    return;
  }
  if (options.conf >= 0 || options.iou >= 0 || !options.save_json.empty())
    throw std::invalid_argument(
        "--task speed validates at val.py's fixed settings (conf 0.25, IoU 0.45, no JSON): "
        "leave out --conf, --iou and --save-json, or use --task val");
  options.split = "val";
  options.conf = 0.25f;
  options.iou = 0.45f;
  options.no_rect = true;
  options.no_plots = true;
}

int run_val() {
  apply_val_task();
  if (!options.save_json.empty())
    cli::require_outputs_spare_inputs({{options.save_json, "the --save-json file"}},
                                      {{options.weights, "the --weights file"},
                                       {options.data, "the --data yaml"},
                                       {options.cfg, "the --cfg model yaml"}},
                                      "give --save-json a new file name");
  data::DatasetConfig config = data::read_dataset_yaml(options.data);
  data::OpenedSplit split =
      data::open_split(config, options.split, {.max_pixels = options.max_pixels});
  for (const std::string& line : data::problem_lines(options.split, split.verification.report))
    std::printf("%s\n", line.c_str());
  if (split.dataset.size() == 0)
    throw std::invalid_argument(options.data + " has no '" + options.split +
                                "' split to validate on; give --split (or --task) train or val, "
                                "or add it");
  const SafetensorsFile weights = models::load_weights_file(options.weights);
  // --single-cls (val.py's): the labels as one class, and the model with its own classes
  // (whatever the dataset's count), every detection counted as class 0.
  const int nc =
      options.single_cls ? models::metadata_nc(weights, options.weights) : config.num_classes();
  if (options.single_cls) {
    config.names = data::single_class_names(config.names);
    split.dataset = data::as_single_class(split.dataset);
  }
  models::DetectionModel model = load_model(weights, nc);
  models::ValidationOptions val;
  val.single_cls = options.single_cls;
  val.batch = options.batch;
  val.imgsz = inference_size(model);
  val.rect = !options.no_rect;
  val.workers = options.workers;
  if (options.conf >= 0) val.nms.conf_threshold = options.conf;
  if (options.iou >= 0) val.nms.iou_threshold = options.iou;
  val.keep_detections = !options.save_json.empty();
  const OutputFolder& folder = options.val_folder;
  const std::string pictures_dir =
      options.no_plots ? "" : models::resolve_run_dir(folder.project, folder.name, folder.exist_ok);
  if (!pictures_dir.empty())
    val.on_first_batch = [&](const data::Batch& batch,
                             const std::vector<std::vector<models::Detection>>& detections) {
      models::write_val_batch_pictures(pictures_dir, batch, detections, config.names);
    };
  const models::ValidationResult result = models::validate(model, split.dataset, val);

  const auto& m = result.metrics;
  std::printf("%22s %11s %11s %11s %11s %11s %11s\n", "Class", "Images", "Instances", "P", "R",
              "mAP50", "mAP50-95");
  std::printf("%22s %11lld %11lld %11.3f %11.3f %11.3f %11.3f\n", "all",
              static_cast<long long>(result.images), static_cast<long long>(result.labels),
              m.mean_precision, m.mean_recall, m.map50, m.map50_95);
  for (const models::ClassMetrics& c : m.classes)
    std::printf("%22s %11lld %11lld %11.3f %11.3f %11.3f %11.3f\n",
                config.names.at(size_t(c.class_id)).c_str(), static_cast<long long>(result.images),
                static_cast<long long>(c.labels), c.precision, c.recall, c.ap50, c.ap50_95);
  std::printf(
      "(AP is YOLOv5's: 101-point interpolation with a (recall 1, precision 0) end point,"
      " so perfect detections score 0.995)\n");
  std::printf("%s\n",
              models::speed_line(result.times, result.images, {val.batch, 3, val.imgsz, val.imgsz})
                  .c_str());
  if (!options.save_json.empty()) {
    nlohmann::json all = nlohmann::json::array();
    for (const models::ImageDetections& image : result.detections)
      for (const models::Detection& d : image.detections)
        all.push_back(coco_detection(fs::path(image.path).stem().string(), d));
    write_json(options.save_json, all);
    std::printf("wrote %zu detections to %s\n", all.size(), options.save_json.c_str());
  }
  if (!pictures_dir.empty()) {
    models::write_validation_plots(pictures_dir, result.metrics, result.confusion, config.names);
    std::printf("pictures (curves, confusion matrix, first batch) saved to %s\n",
                pictures_dir.c_str());
  }
  return 0;
}

// An image's path below the --source folder (a single --source image: its file name).
fs::path source_relative_path(const std::string& image) {
  if (!fs::is_directory(options.source)) return fs::path(image).filename();
  return fs::path(image).lexically_relative(fs::path(options.source).lexically_normal());
}

// The folder predict writes to: --out as given, else <project>/<name> numbered. With `claim`
// it is created (numbered past a folder another run took meanwhile, which leaves the checks
// made on the unclaimed name valid: a new folder holds no input); without, only named.
fs::path predict_folder(bool claim) {
  const OutputFolder& folder = options.predict_folder;
  if (options.out.empty())
    return claim ? models::resolve_run_dir(folder.project, folder.name, folder.exist_ok)
                 : models::next_run_dir(folder.project, folder.name, folder.exist_ok);
  if (claim) fs::create_directories(options.out);
  return options.out;
}

// Where predict draws each image, below its folder (see the top of this file), once checked
// that no output in `folder` lands on an input and no two images share an output.
std::vector<fs::path> drawn_paths(const std::vector<std::string>& images, const fs::path& folder) {
  const std::string flag = options.out.empty() ? "--project/--name" : "--out";
  if (fs::exists(folder) && !fs::is_directory(folder))
    throw std::invalid_argument(flag + " '" + folder.string() +
                                "' is a file; predict writes a folder of drawn images there: give "
                                "a folder's name (nothing was written)");
  std::vector<fs::path> relative;
  std::vector<cli::RolePath> outputs, inputs;
  for (const std::string& image : images) {
    relative.push_back(source_relative_path(image).replace_extension(".jpg"));
    outputs.push_back({(folder / relative.back()).string(), "the drawn copy of '" + image + "'"});
    inputs.push_back({image, "the --source image"});
  }
  cli::require_distinct_outputs(outputs, "rename one of the two images (each is drawn as a .jpg)");
  std::vector<cli::RolePath> written = outputs;
  written.push_back({(folder / "detections.json").string(), "detections.json"});
  inputs.push_back({options.weights, "the --weights file"});
  inputs.push_back({options.cfg, "the --cfg model yaml"});
  if (!options.names.empty()) inputs.push_back({options.names, "the --names yaml"});
  cli::require_outputs_spare_inputs(written, inputs,
                                    "give " + flag + " a folder apart from --source");
  if (!options.save_raw.empty())
    cli::require_outputs_spare_inputs({{options.save_raw, "the --save-raw file"}}, inputs,
                                      "give --save-raw a new file name");
  return relative;
}

// One detection as a line of YOLOv5's label format (detect.py --save-txt): class, then the box's
// centre and size normalised by the image's, then with --save-conf the confidence; each
// number as printf's %g writes it.
std::string label_line(const models::Detection& d, int image_width, int image_height) {
  const double w = image_width, h = image_height;
  char line[160];
  int length = std::snprintf(line, sizeof line, "%d %g %g %g %g", d.class_id,
                             (d.box.x1 + d.box.x2) / 2 / w, (d.box.y1 + d.box.y2) / 2 / h,
                             (d.box.x2 - d.box.x1) / w, (d.box.y2 - d.box.y1) / h);
  if (options.save_conf) std::snprintf(line + length, sizeof line - size_t(length), " %g", d.conf);
  return std::string(line) + "\n";
}

// The text drawn above a box: "name conf", "name" (--hide-conf) or none (--hide-labels).
std::string drawn_label(const models::Detection& d, const std::vector<std::string>& names) {
  if (options.hide_labels) return "";
  return data::box_text(d.class_id, options.hide_conf ? -1.0f : d.conf, names);
}

// A class's folder below crops/: its name (its index without one), '/' made '_' so that it
// stays one folder inside crops/.
std::string crop_folder_name(int class_id, const std::vector<std::string>& names) {
  std::string name = data::box_text(class_id, -1.0f, names);
  std::replace(name.begin(), name.end(), '/', '_');
  return name == "." || name == ".." ? std::to_string(class_id) : name;
}

// --save-crop: each detection cut from the original image (models/eval/detection_crop.h) to
// crops/<class>/<image stem>.jpg, a second one of a class from that image numbered <stem>2.jpg,
// and so on (YOLOv5's increment_path), in detect.py's order: the lowest confidence first.
void save_crops(const fs::path& folder, const std::string& image_path, const data::Image& original,
                const std::vector<models::Detection>& detections,
                const std::vector<std::string>& names) {
  const std::string stem = fs::path(image_path).stem().string();
  for (auto d = detections.rbegin(); d != detections.rend(); ++d) {
    const fs::path class_folder = folder / "crops" / crop_folder_name(d->class_id, names);
    fs::create_directories(class_folder);
    data::write_image(models::first_unused_path(class_folder.string(), stem, ".jpg"),
                      models::detection_crop(original, d->box));
  }
}

int run_predict() {
  std::vector<std::string> names;
  if (!options.names.empty()) names = data::read_dataset_yaml(options.names).names;
  const SafetensorsFile weights = models::load_weights_file(options.weights);
  if (names.empty()) names = models::metadata_names(weights);
  const int nc = !names.empty() ? int(names.size()) : models::metadata_nc(weights, options.weights);
  models::DetectionModel model = load_model(weights, nc);
  const Device device = model.device();
  const std::vector<std::string> images = fs::is_directory(options.source)
                                              ? data::list_image_files({options.source})
                                              : std::vector<std::string>{options.source};
  if (images.empty()) throw std::invalid_argument("no images found in " + options.source);
  const std::vector<fs::path> drawn_below = drawn_paths(images, predict_folder(false));
  models::NmsOptions nms;
  if (options.conf >= 0) nms.conf_threshold = options.conf;
  if (options.iou >= 0) nms.iou_threshold = options.iou;
  nms.classes = options.classes;
  nms.max_det = options.max_det;
  const int canvas = inference_size(model);
  const fs::path folder = predict_folder(true);

  nlohmann::json all = nlohmann::json::array();
  SafetensorsFile raw;
  models::StageTimes times;
  int skipped = 0, label_files = 0;
  for (size_t i = 0; i < images.size(); ++i) {
    const std::string& path = images[i];
    // An unreadable file in a folder is skipped with a warning; the others still get their
    // detections (and detections.json is written). A single unreadable --source is an error.
    models::LetterboxedImage letterboxed;
    try {
      letterboxed = models::letterboxed_image(path, canvas, options.max_pixels);
    } catch (const data::ImageError& error) {
      if (images.size() == 1) throw;
      std::printf("warning: skipped %s\n", error.what());
      ++skipped;
      continue;
    }
    const models::Letterbox& box = letterboxed.letterbox;
    const Tensor input = models::timed_stage(times.pre_process_s, device, [&] {
      return models::network_input(letterboxed.image, device);
    });
    const std::vector<Tensor> head = models::timed_stage(
        times.inference_s, device, [&] { return model.forward(input, Mode::eval); });
    if (!options.save_raw.empty()) {
      const std::string k = std::to_string(raw.metadata().size());
      raw.metadata()["image." + k] = path;
      raw.add_tensor("input." + k, input, {1, 3, canvas, canvas});
      raw.add_tensor("output." + k, models::decode_predictions(head, model),
                     {1, models::decoded_rows_per_image(head, model), model.outputs_per_anchor()});
      raw.add_values<float>(
          "letterbox." + k,
          {box.gain, box.pad_x, box.pad_y, box.original_width, box.original_height}, {5});
    }
    const std::vector<models::Detection> detections = models::timed_stage(
        times.nms_s, device, [&] { return models::detections_in_image(head, model, box, nms); });
    const data::Image original = options.no_save && !options.save_crop
                                     ? data::Image()
                                     : data::read_image(path, options.max_pixels);
    if (options.save_crop) save_crops(folder, path, original, detections, names);
    data::Image drawn = options.no_save ? data::Image() : original;
    std::string labels;
    for (const models::Detection& d : detections) {
      if (!options.no_save)
        data::draw_box(drawn, int(d.box.x1), int(d.box.y1), int(d.box.x2), int(d.box.y2),
                       d.class_id, drawn_label(d, names), 0, options.line_thickness);
      labels += label_line(d, int(box.original_width), int(box.original_height));
      all.push_back(
          coco_detection(source_relative_path(path).replace_extension().generic_string(), d));
    }
    // labels/<path below --source>.txt, as detect.py's labels/: none without detections
    if (options.save_txt && !labels.empty()) {
      const fs::path txt =
          (folder / "labels" / source_relative_path(path)).replace_extension(".txt");
      fs::create_directories(txt.parent_path());
      std::ofstream(txt) << labels;
      ++label_files;
    }
    const std::string out =
        options.no_save ? std::string("(not drawn: --nosave)") : (folder / drawn_below[i]).string();
    if (!options.no_save) {
      fs::create_directories(fs::path(out).parent_path());
      data::write_image(out, drawn);
    }
    std::printf("%s: %zu detections -> %s\n", path.c_str(), detections.size(), out.c_str());
  }
  write_json((folder / "detections.json").string(), all);
  if (!options.save_raw.empty()) raw.save(options.save_raw);
  const int64_t predicted = int64_t(images.size()) - skipped;
  std::printf("%s\n", models::speed_line(times, predicted, {1, 3, canvas, canvas}).c_str());
  if (skipped > 0)
    std::printf("%d of %zu images skipped (unreadable); the others' detections are in %s\n",
                skipped, images.size(), (folder / "detections.json").c_str());
  std::printf("Results saved to %s\n", folder.c_str());
  if (options.save_txt)
    std::printf("%d labels saved to %s\n", label_files, (folder / "labels").c_str());
  return 0;
}

// --project, --name and --exist-ok, for `what` the command writes; returns them.
std::vector<CLI::Option*> add_output_folder_options(CLI::App* command, OutputFolder& folder,
                                                    const std::string& what) {
  return {command->add_option("--project", folder.project,
                              what + " go to PROJECT/NAME (default " + folder.project + "/" +
                                  folder.name + ", then " + folder.name + "2, ...)"),
          command->add_option("--name", folder.name, "See --project"),  // resolve_run_dir checks it
          command->add_flag("--exist-ok", folder.exist_ok,
                            "Reuse PROJECT/NAME instead of numbering a new one")};
}

// --task's values: val.py's, but study (mAP and speed over image sizes 256..1536), which is
// not implemented.
std::string val_task(const std::string& task) {
  if (task == "train" || task == "val" || task == "test" || task == "speed") return "";
  if (task == "study")
    return "val.py's study task (mAP and speed at sizes 256..1536) is not implemented: run "
           "--task speed with each --imgsz";
  return "must be train, val, test or speed, got '" + task + "'";
}

void add_model_options(CLI::App* command) {
  command->add_option("--cfg", options.cfg, "Model yaml (default: the one the weights carry)");
  command->add_option("--weights", options.weights, "Weights (.safetensors or YOLOv5 .pt)")
      ->required()
      ->check(CLI::ExistingFile);
  command->add_option("--imgsz,--img,--img-size", options.imgsz, "Inference size in pixels")
      ->check(CLI::Range(32, 8192));
  command->add_option("--iou,--iou-thres", options.iou, "NMS IoU threshold")
      ->check(CLI::Range(0.0, 1.0));
  cli::add_max_pixels_option(command, options.max_pixels);
  options.device.add_to(command);
}

}  // namespace

void add_eval_commands(CLI::App& app) {
  CLI::App* val = app.add_subcommand("val", "mAP of weights on a dataset split (YOLOv5's val)");
  add_model_options(val);
  val->add_option("--data", options.data, "Dataset yaml")->required()->check(CLI::ExistingFile);
  CLI::Option* split =
      val->add_option("--split", options.split, "Split to evaluate: val, train or test");
  val->add_option("--task", options.task,
                  "val.py's task: val, train or test (= --split), or speed (timing at conf 0.25, "
                  "IoU 0.45, square batches; no JSON or pictures)")
      ->check(val_task)
      ->excludes(split);
  val->add_option("--batch,--batch-size", options.batch, "Images per batch")->check(cli::kPositive);
  val->add_option("--conf,--conf-thres", options.conf, "Confidence threshold (default 0.001)")
      ->check(CLI::Range(0.0, 1.0));
  val->add_option("--workers", options.workers, "Loader threads")->check(cli::kNonNegative);
  val->add_flag("--no-rect", options.no_rect, "Square batches instead of rectangular ones");
  val->add_flag("--single-cls", options.single_cls,
                "Score as one class ('item'): every label and detection class 0 (the model "
                "keeps its own classes)");
  val->add_option("--save-json", options.save_json,
                  "Write detections as COCO results JSON to F (alone, as YOLOv5's: "
                  "predictions.json)")
      ->expected(0, 1)
      ->default_str("predictions.json")  // what --save-json alone means
      ->option_text("[F]");
  add_output_folder_options(val, options.val_folder, "The pictures");
  val->add_flag("--noplots", options.no_plots, "Write no pictures (and no folder)");
  val->add_flag_callback(
      "--verbose", [] {}, "YOLOv5's switch for the per-class table, which val always prints");
  cli::refuse_flags(val, cli::yolov5_val_refusals());  // YOLOv5's val.py flags bareyolo lacks

  CLI::App* predict = app.add_subcommand("predict", "Detect objects in images, draw them");
  add_model_options(predict);
  predict->add_option("--source", options.source, "An image or a folder of images")
      ->required()
      ->check(CLI::ExistingPath);
  predict->add_option("--conf,--conf-thres", options.conf, "Confidence threshold (default 0.25)")
      ->check(CLI::Range(0.0, 1.0));
  const std::vector<CLI::Option*> folder_options =
      add_output_folder_options(predict, options.predict_folder, "Drawn images and labels");
  CLI::Option* out =
      predict->add_option("--out", options.out, "Write to this folder as it is (no numbering)");
  for (CLI::Option* option : folder_options) out->excludes(option);
  predict->add_option("--names,--data", options.names, "Dataset yaml whose class names to draw");
  predict->add_flag("--save-txt", options.save_txt,
                    "Also write labels/<image>.txt: class cx cy w h, normalised (YOLOv5)");
  predict->add_flag("--save-crop", options.save_crop,
                    "Also write each detection's crop to crops/<class>/<image>.jpg");
  predict->add_flag("--save-conf", options.save_conf, "With --save-txt: the confidence last");
  predict->add_flag("--nosave", options.no_save, "Draw no images (labels and JSON still)");
  predict->add_option("--classes", options.classes, "Keep only these class indices")
      ->check(cli::kNonNegative);
  predict->add_option("--max-det", options.max_det, "Detections per image at most (default 300)")
      ->check(cli::kPositive);
  predict->add_flag("--hide-labels", options.hide_labels, "Draw boxes without their labels");
  predict->add_flag("--hide-conf", options.hide_conf, "Draw labels without confidences");
  predict->add_option("--line-thickness", options.line_thickness, "Box outline in pixels")
      ->check(cli::kPositive);
  predict->add_option("--save-raw", options.save_raw,
                      "Write each image's network input and decoded outputs (safetensors)");
  cli::refuse_flags(predict, cli::yolov5_predict_refusals());  // detect.py's flags it lacks
}

std::optional<int> run_eval_command(const CLI::App& app) {
  if (app.got_subcommand("val")) return run_val();
  if (app.got_subcommand("predict")) return run_predict();
  return std::nullopt;
}

}  // namespace bareyolo
