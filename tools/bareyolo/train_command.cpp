// tools/bareyolo/train_command.cpp — see train_command.h.
#include "tools/bareyolo/train_command.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "data/shapes.h"
#include "engine/shipped_files.h"
#include "models/train/flat_yaml.h"
#include "models/train/launch.h"
#include "models/train/options.h"
#include "models/train/run_dir.h"
#include "models/yolo/weights.h"
#include "tools/bareyolo/max_pixels_option.h"
#include "tools/bareyolo/on_off_flags.h"
#include "tools/bareyolo/resume_flags.h"
#include "tools/bareyolo/validators.h"
#include "tools/bareyolo/yolov5_flags.h"

namespace bareyolo {

namespace {

namespace fs = std::filesystem;

// The main job's settings on the built-in shapes data (README): YOLOv5's recipe from
// scratch needs its whole LR schedule, and 128 px is what these images need.
constexpr int kShapesEpochs = 80, kShapesImgsz = 128;

struct TrainCommandOptions {
  models::TrainOptions train;
  std::string hyp, config, optimizer = "SGD", device = "auto", tf32 = "off", grad_dtype = "fp32";
  std::string winograd = "on", cudnn = "deterministic";
  std::string cuda_graph = "auto";
  std::string channels_last = "auto";
  bool no_val = false, no_plots = false, no_tensorboard = false, no_autoanchor = false;
  std::optional<double> label_smoothing;  // --label-smoothing: over the --hyp file's value
  std::vector<int> freeze;                // YOLOv5's --freeze: N, or layers 0 1 ... N-1
  CLI::App* command = nullptr;
  CLI::Option *resume = nullptr, *epochs = nullptr, *imgsz = nullptr;
} options;

// The built-in shapes dataset, generated on first use, and again when an older bareyolo's
// generator wrote the one there (its images differ from what the recorded numbers used:
// docs/benchmarks.md).
std::string default_dataset() {
  const fs::path folder = fs::path("datasets") / "shapes", yaml = folder / "data.yaml";
  if (fs::exists(yaml)) {
    if (data::shapes_dataset_age(yaml.string()) != data::ShapesDatasetAge::older)
      return yaml.string();
    std::printf("datasets/shapes was written by an older bareyolo: replacing it\n");
    fs::remove_all(folder);
  }
  std::printf("generating the built-in shapes dataset in datasets/shapes ...\n");
  return data::make_shapes_dataset({.out = folder.string()});
}

// True when `flag` was given and asks for its setting (`--sync-bn`, `sync_bn: true`; not
// `sync_bn: false`).
bool switched(const std::string& flag) {
  const CLI::Option* option = options.command->get_option_no_throw(flag);
  return option->count() > 0 && option->as<bool>();
}

// Refuses an on/off pair given together, from the command line, --config or both.
void check_on_off_flags() {
  for (const auto& [on, off] : kOnOffFlags)
    if (switched(on) && switched(off))
      throw std::invalid_argument(std::string(on) + " and " + off +
                                  " were both given (on the command line or in --config); they "
                                  "contradict each other: keep one");
}

// YOLOv5's opt.yaml values that mean "not asked for" (its off values where bareyolo's differ),
// and its keys that describe the YOLOv5 run itself.
constexpr std::pair<const char*, const char*> kYolov5OffValues[] = {{"save_period", "-1"},
                                                                    {"local_rank", "-1"},
                                                                    {"bbox_interval", "-1"},
                                                                    {"artifact_alias", "latest"}};
constexpr const char* kYolov5RunKeys[] = {"save_dir"};

// True when a --config entry asks for nothing: null, false or '' (how YOLOv5's opt.yaml, and
// any --config file, leaves a flag off), or one of YOLOv5's off values.
bool asks_nothing(const models::FlatYamlEntry& entry) {
  if (entry.value.IsNull()) return true;
  if (!entry.value.IsScalar()) return false;
  const std::string& value = entry.value.Scalar();
  if (value.empty() || value == "false") return true;
  for (const auto& [key, off] : kYolov5OffValues)
    if (entry.key == key && value == off) return true;
  return false;
}

// --config FILE: each `key: value` of the yaml is the flag --key (underscores may stand for
// dashes), applied only where the command line did not give that flag or its opposite
// (on_off_flags.h), so the command line wins. Validators run as for the command line; a list
// gives the flag each of its values. The file is read as --hyp is (flat_yaml.h: a repeated key
// is refused), but takes YOLOv5's opt.yaml as it is: a null, false or '' value asks for
// nothing, so that only the flags it switches on are applied, or refused by name
// (yolov5_flags.h); keys of YOLOv5's own run (save_dir) are named in a note and skipped.
void apply_config_yaml(const std::string& path) {
  std::set<std::string> on_command_line;
  for (const CLI::Option* flag : options.command->get_options())
    if (flag->count() > 0) on_command_line.insert(flag->get_name());
  for (const models::FlatYamlEntry& entry :
       models::read_flat_yaml(path, "--config", models::FlatYamlValues::lists_and_nulls)) {
    const std::string where = "--config " + path + ":" + std::to_string(entry.line) + ": '";
    if (std::find(std::begin(kYolov5RunKeys), std::end(kYolov5RunKeys), entry.key) !=
        std::end(kYolov5RunKeys)) {
      std::printf(
          "note: %s%s' describes YOLOv5's run, not applied (the run goes to "
          "--project/--name)\n",
          where.c_str(), entry.key.c_str());
      continue;
    }
    if (asks_nothing(entry)) continue;
    std::string key = entry.key;
    for (char& c : key) c = c == '_' ? '-' : c;
    CLI::Option* flag = options.command->get_option_no_throw("--" + key);
    if (flag == nullptr || key == "config" || key == "help")
      throw std::invalid_argument(
          where + key + "' is not a flag of `bareyolo train` (see bareyolo train --help)");
    if (on_command_line.count(flag->get_name()) ||
        on_command_line.count(opposite_flag(flag->get_name())))
      continue;
    try {
      if (entry.value.IsSequence())
        for (const YAML::Node& item : entry.value) flag->add_result(item.Scalar());
      else
        flag->add_result(entry.value.Scalar());
      // An on/off switch runs only for a true value: any other false one (off, no, 0) would
      // silently leave the default, which its opposite switch exists to override.
      const std::string opposite = opposite_flag(flag->get_name());
      if (!opposite.empty() && !flag->as<bool>())
        throw std::invalid_argument(where + entry.key + ": " + entry.value.Scalar() +
                                    "' switches nothing: write true to ask for " +
                                    flag->get_name() + ", or ask for " + opposite +
                                    " (false or null leave the default)");
      flag->run_callback();
    } catch (const CLI::Error& e) {
      throw std::invalid_argument(where + key + "': " + e.what());
    }
  }
}

// YOLOv5's --freeze as a layer count: one value N freezes layers 0 .. N-1; a list names the
// layers, and bareyolo freezes a leading run of them only (0 1 ... N-1, in any order).
int freeze_count(std::vector<int> layers) {
  if (layers.size() == 1) return layers[0];
  std::sort(layers.begin(), layers.end());
  for (size_t i = 0; i < layers.size(); ++i)
    if (layers[i] != int(i)) {
      std::string given;
      for (int layer : layers) given += " " + std::to_string(layer);
      throw std::invalid_argument("--freeze" + given +
                                  ": bareyolo freezes the first N layers only (0 1 ... N-1); "
                                  "give --freeze N");
    }
  return int(layers.size());
}

// Puts what the flags ask for on `t` as a new run takes it; nothing is written yet.
void apply_run_flags(models::TrainOptions& t) {
  if (!t.data.empty()) t.data = fs::absolute(t.data).string();  // a resume elsewhere finds it
  // Weights that carry their model (a YOLOv5 .pt, bareyolo's own) build it unless --cfg is
  // given: fine-tuning yolov5s.pt trains YOLOv5s, not the default yolov5n.
  if (options.command->count("--cfg") == 0 && !t.weights.empty() &&
      models::weights_carry_model(t.weights))
    t.cfg.clear();
  // Absolute for the workers; a relative path not found here names a shipped yaml.
  else
    t.cfg =
        fs::exists(t.cfg) ? fs::absolute(t.cfg).string() : find_shipped_file(t.cfg).value_or(t.cfg);
  if (!t.weights.empty()) t.weights = fs::absolute(t.weights).string();
  if (!options.hyp.empty()) models::load_hyp_yaml(options.hyp, t);
  if (options.label_smoothing) t.loss.label_smoothing = *options.label_smoothing;
  if (!options.freeze.empty()) t.freeze = freeze_count(options.freeze);
  t.optimizer = models::parse_optimizer_name(options.optimizer);
  t.validate = !options.no_val;
  t.autoanchor = !options.no_autoanchor;
  t.plots = !options.no_plots;
  t.tensorboard = !options.no_tensorboard;
  t.tf32 = options.tf32 == "on";
  t.cudnn_deterministic = options.cudnn == "deterministic";
  t.winograd = options.winograd == "on";
  t.cuda_graph = options.cuda_graph == "on"    ? models::CudaGraphMode::on
                 : options.cuda_graph == "off" ? models::CudaGraphMode::off
                                               : models::CudaGraphMode::automatic;
  t.channels_last = options.channels_last == "on"    ? models::ChannelsLastMode::on
                    : options.channels_last == "off" ? models::ChannelsLastMode::off
                                                     : models::ChannelsLastMode::automatic;
  t.bf16_grad_buckets = options.grad_dtype == "bf16";
}

int train() {
  // ---- every flag checked before anything is written (the built-in data, the run) ----
  if (!options.config.empty()) apply_config_yaml(options.config);
  check_on_off_flags();
  models::TrainOptions& t = options.train;
  models::check_run_name(t.name);
  apply_run_flags(t);
  if (options.resume->count() > 0) {
    // The checkpoint's saved configuration, with the few changes resume_flags.h allows.
    t.resume = models::find_resume_checkpoint(options.resume->as<std::string>(), t.project);
    std::printf("resuming from %s\n", t.resume.c_str());
    t.resume_changes = resume_changes(*options.command, t, [](const std::string& note) {
      std::printf("note: %s\n", note.c_str());
    });
  } else if (t.data.empty()) {
    // The built-in data's own schedule, unless asked otherwise: small synthetic images
    // need neither 640 px nor more epochs than YOLOv5's recipe takes to converge on them.
    t.data = fs::absolute(default_dataset()).string();
    if (options.epochs->count() == 0) t.epochs = kShapesEpochs;
    if (options.imgsz->count() == 0) t.imgsz = kShapesImgsz;
  }
  t.device = options.device;
  models::TrainSummary summary;
  try {
    summary = models::run_training(t, [](const std::string& line) {
      std::printf("%s\n", line.c_str());
      std::fflush(stdout);
    });
  } catch (const models::TrainingInterrupted& stop) {  // not an error: exit as the signal asks
    std::fprintf(stderr, "bareyolo: %s\n", stop.what());
    return stop.exit_status();
  }
  if (!summary.rank0) return 0;
  std::printf(
      "%s: %d epochs, %lld optimizer steps in %.0f s; best mAP50 %.3f, mAP50-95 %.3f; "
      "weights in %s/weights\n",
      summary.finished ? "done" : "stopped", summary.epochs_run,
      static_cast<long long>(summary.optimizer_steps), summary.seconds, summary.best_map50,
      summary.best_map50_95, summary.run_dir.c_str());
  return 0;
}

}  // namespace

void add_train_command(CLI::App& app) {
  models::TrainOptions& t = options.train;
  t.cfg = find_shipped_file("models/yolov5n.yaml").value_or("models/yolov5n.yaml");
  CLI::App* cmd = app.add_subcommand("train", "Train a detector with YOLOv5's recipe");
  options.command = cmd;
  cmd->add_option("--data", t.data,
                  "Dataset yaml (default: the built-in shapes data, generated "
                  "in datasets/shapes on first use)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--cfg", t.cfg,
                  "Model yaml (a relative path not found here: bareyolo's models/; default: the "
                  "model --weights carry, else yolov5n)")
      ->capture_default_str();
  cmd->add_option("--weights", t.weights,
                  "Initial weights (.safetensors or a YOLOv5 .pt); default or '' (YOLOv5's "
                  "--weights ''): from scratch")
      ->check(CLI::ExistingFile | CLI::IsMember({""}));
  options.epochs =
      cmd->add_option("--epochs", t.epochs,
                      "Epochs (the built-in data: " + std::to_string(kShapesEpochs) + ")")
          ->check(cli::kPositive)
          ->capture_default_str();
  cmd->add_option("--batch,--batch-size", t.batch,
                  "Batch size, global: all ranks together, each rank "
                  "trains batch/ranks images; -1: AutoBatch (GPU memory)")
      ->check(cli::kBatchOrAuto)
      ->capture_default_str();
  options.imgsz = cmd->add_option("--imgsz,--img,--img-size", t.imgsz,
                                  "Image size in pixels, rounded up to a "
                                  "multiple of 32 (the built-in data: " +
                                      std::to_string(kShapesImgsz) + ")")
                      ->check(CLI::Range(32, 8192))
                      ->capture_default_str();
  cmd->add_flag("--rect", t.rect,
                "Rectangular batches (YOLOv5's --rect): the images in aspect-ratio order, not "
                "shuffled, each batch letterboxed to its own stride-multiple shape, no mosaic");
  cmd->add_flag("--multi-scale", t.multi_scale,
                "Resize every batch (bilinear) to a random size from imgsz/2 to 3 imgsz/2, a "
                "multiple of the stride, drawn per step from --seed (YOLOv5's --multi-scale)");
  cmd->add_option("--workers", t.workers,
                  "Data loader threads per rank; -1: one per core of the rank but one on a GPU "
                  "(at most the rank's batch), 2 on the CPU")
      ->check(cli::kNonNegative | CLI::IsMember({-1}))
      ->capture_default_str();
  cmd->add_option("--cache", t.cache,
                  "ram (in /dev/shm, removed when the job ends; disk when it does not fit; "
                  "also --cache alone, as YOLOv5's) or disk (beside the labels): decode the "
                  "images once into a file that every rank and loader thread of the machine maps")
      ->expected(0, 1)
      ->default_str("ram")  // what --cache alone means; not given, nothing is cached
      ->option_text("[ram|disk]")
      ->check(cli::one_of({"ram", "disk"}));
  cmd->add_option("--device", options.device,
                  "auto (every GPU, else CPU ranks to fit the cores), cpu, 0, 0,1, cuda:0, 0,0 "
                  "(two ranks on one GPU); more than one rank forks workers unless a launcher "
                  "(torchrun, srun, mpirun) started this process")
      ->capture_default_str();
  cmd->add_option("--nproc-per-node", t.nproc_per_node,
                  "CPU ranks (with --device cpu or auto on a machine without GPUs); 0: auto")
      ->check(cli::kNonNegative)
      ->capture_default_str();
  cmd->add_flag_callback(
         "--sync-bn", [&] { t.sync_bn = true; },
         "SyncBatchNorm when distributed: BN statistics over the global batch "
         "(the default with more than one rank)")
      ->disable_flag_override();  // "--sync-bn=false" would ask for nothing: --no-sync-bn says it
  cmd->add_flag_callback(
         "--no-sync-bn", [&] { t.sync_bn = false; },
         "BatchNorm statistics per rank (warned below 16 images per rank)")
      ->disable_flag_override();
  cmd->add_option("--backend", t.backend,
                  "Communication: auto (NCCL for distinct GPUs, shared memory for CPU ranks "
                  "on one host, else TCP), tcp, shm or nccl")
      ->check(CLI::IsMember({"auto", "tcp", "shm", "nccl"}))
      ->capture_default_str();
  cmd->add_option("--tf32", options.tf32,
                  "on: TF32 tensor-core math for float convolutions and GEMMs on GPUs")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  cmd->add_option("--cudnn", options.cudnn,
                  "deterministic: the GPU's convolutions run the fastest of cuDNN's "
                  "deterministic algorithms, timed once per machine, so a run repeats its bits; "
                  "fast: the fastest of all, which may sum with atomics")
      ->check(CLI::IsMember({"deterministic", "fast"}))
      ->capture_default_str();
  cmd->add_option("--winograd", options.winograd,
                  "on: the CPU's 3x3 stride-1 convolutions run Winograd F(2x2, 3x3) where "
                  "build/bench_conv3x3 measured it faster than im2col + GEMM (fewer "
                  "multiplications, float results that differ in the last bits); off: "
                  "im2col + GEMM everywhere")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  cmd->add_option("--cuda-graph", options.cuda_graph,
                  "auto: record each kind of training step as one CUDA graph once and replay "
                  "it (one process on a GPU, batches of one shape); on: the same, several "
                  "GPUs' steps with their NCCL collectives too, or an error saying why not; "
                  "off: launch every kernel of every step")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->capture_default_str();
  cmd->add_option("--channels-last", options.channels_last,
                  "Activations and their gradients in channels last (NHWC) rather than NCHW, "
                  "the same numbers either way. auto: NCHW for now; on: channels last (an op "
                  "whose kernel reads NCHW only runs on NCHW copies of its views: slower, until "
                  "the kernels take it); off: NCHW")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->capture_default_str();
  cmd->add_flag_callback(
         "--amp", [&] { t.amp = true; },
         "bf16 mixed precision: activations and their gradients in bf16 tensors, computed in "
         "fp32; weights, BatchNorm statistics, loss and optimizer in fp32 (cuDNN's bf16 "
         "tensor-core convolutions on a GPU). Neither --amp nor --no-amp: fp32 for now (bf16 on "
         "GPUs with bf16 tensor cores once a GPU run has checked it: docs/gpu.md)")
      ->disable_flag_override();  // "--amp=false" would leave the default: --no-amp says it
  cmd->add_flag_callback(
         "--no-amp", [&] { t.amp = false; }, "fp32 activations and gradients throughout")
      ->disable_flag_override();
  cmd->add_option("--timeout", t.timeout_s,
                  "Seconds a rank of a running job waits for the others (a collective) before "
                  "failing")
      ->check(cli::kPositive)
      ->capture_default_str();
  cmd->add_option("--rendezvous-timeout", t.rendezvous_timeout_s,
                  "Seconds a rank joining a job waits for the others to join (saying every 10 s "
                  "which it waits for) before failing")
      ->check(cli::kPositive)
      ->capture_default_str();
  cmd->add_option("--stall-timeout", t.stall_timeout_s,
                  "Seconds a rank of a running job may make no progress (stopped, deadlocked, "
                  "stuck in I/O) before the job ends naming it (0: never; independent of "
                  "--timeout)")
      ->check(cli::kNonNegative)
      ->capture_default_str();
  cmd->add_option("--max-restarts", t.max_restarts,
                  "After a worker fails, stop every worker and start the job again from the "
                  "run's newest checkpoint (see --save-steps), at most this many times "
                  "(bareyolo's own launcher; under torchrun use its --max-restarts)")
      ->check(cli::kNonNegative)
      ->capture_default_str();
  cmd->add_option("--nnodes", t.nnodes,
                  "Machines in the run, each running this command with "
                  "its --node-rank (needs --master-addr, --master-port "
                  "and the same BAREYOLO_STORE_TOKEN on every machine)")
      ->check(cli::kPositive)
      ->capture_default_str();
  cmd->add_option("--node-rank", t.node_rank, "This machine's index in 0 .. nnodes-1")
      ->check(cli::kNonNegative)
      ->capture_default_str();
  cmd->add_option("--master-addr", t.master_addr, "Host of global rank 0 (its rendezvous store)")
      ->capture_default_str();
  cmd->add_option("--master-port", t.master_port,
                  "Port of the rendezvous store (0: a free one, "
                  "one machine only)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  cmd->add_option("--project", t.project, "Folder of runs")->capture_default_str();
  cmd->add_option("--name", t.name,
                  "Run name: <project>/<name>, numbered <name>2, 3, ... "
                  "when it exists")
      ->capture_default_str();
  cmd->add_flag("--exist-ok", t.exist_ok, "Reuse <project>/<name> instead of numbering");
  cmd->add_flag("--strict", t.strict,
                "Refuse to train when an image or label of the train or val split has a "
                "problem (by default such images are skipped, and counted in the log)");
  cli::add_max_pixels_option(cmd, t.max_pixels);
  cmd->add_option("--seed", t.seed, "Seed of initialisation, shuffling and augmentation")
      ->check(cli::kNonNegative)
      ->capture_default_str();
  cmd->add_option("--nbs", t.nbs, "Nominal batch size: gradients accumulate to it")
      ->check(cli::kPositive)
      ->capture_default_str();
  cmd->add_option("--patience", t.patience,
                  "Stop after this many validations without a better fitness (0: never; "
                  "with --no-val only the last epoch is validated)")
      ->check(cli::kNonNegative)
      ->capture_default_str();
  cmd->add_option("--optimizer", options.optimizer,
                  "SGD (Nesterov), Adam or AdamW, over YOLOv5's groups")
      ->check(CLI::IsMember({"SGD", "Adam", "AdamW"}))
      ->capture_default_str();
  cmd->add_flag("--cos-lr", t.schedule.cosine, "Cosine learning-rate schedule (default: linear)");
  cmd->add_flag("--single-cls", t.single_cls,
                "Train a multi-class dataset as one class ('item'): every label class 0, nc 1");
  cmd->add_option("--label-smoothing", options.label_smoothing,
                  "Class-target smoothing epsilon (over --hyp's label_smoothing; default 0)")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--freeze", options.freeze,
                  "Freeze the first N model layers (model.0 ... model.N-1); YOLOv5's list form "
                  "0 1 ... N-1 too")
      ->expected(1, -1)
      ->check(cli::kNonNegative);
  cmd->add_option("--hyp", options.hyp,
                  "Hyperparameter yaml in YOLOv5's format "
                  "(default: hyp.scratch-low's values)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--save-period", t.save_period,
                  "Also save weights/epoch<N>.safetensors every N epochs (0: never)")
      ->check(cli::kNonNegative)
      ->capture_default_str();
  cmd->add_option("--bucket-mb", t.bucket_mb,
                  "Gradient bucket size of the reducer in MB; 0: sized from the model (about 8 "
                  "buckets, 0.25 to 25 MB each), so that communication overlaps backward")
      ->check(cli::kNonNegative)
      ->capture_default_str();
  cmd->add_option("--grad-dtype", options.grad_dtype,
                  "What gradient buckets cross the wire in: fp32, or bf16 (half the bytes; "
                  "gradients still accumulate in fp32, each rank's is rounded once per step)")
      ->check(CLI::IsMember({"fp32", "bf16"}))
      ->capture_default_str();
  cmd->add_option("--trace", t.trace,
                  "Write every rank's timeline (layers, collectives, loader waits) of the "
                  "--trace-steps to FILE as Chrome trace-event JSON (Perfetto, chrome://tracing)");
  cmd->add_option_function<std::string>(
      "--trace-steps",
      [&](const std::string& range) {
        const size_t colon = range.find(':');
        try {
          if (colon == std::string::npos) throw std::invalid_argument("no colon");
          t.trace_begin = std::stoll(range.substr(0, colon));
          t.trace_end = std::stoll(range.substr(colon + 1));
        } catch (const std::exception&) {
          throw CLI::ValidationError("--trace-steps",
                                     "'" + range + "' is not A:B (two step numbers)");
        }
        if (t.trace_begin < 0 || t.trace_end <= t.trace_begin)
          throw CLI::ValidationError("--trace-steps",
                                     "'" + range + "': need 0 <= A < B (optimizer steps A..B-1)");
      },
      "Optimizer steps A:B to trace, from A up to B-1 (default 1:4; 0 includes the start-up)");
  cmd->add_option("--save-steps", t.save_steps,
                  "Also save weights/step<N>.safetensors every N optimizer steps (0: never)")
      ->check(cli::kNonNegative)
      ->capture_default_str();
  cmd->add_option("--save-total-limit", t.save_total_limit,
                  "Keep only the newest N periodic checkpoints (0: keep all)")
      ->check(cli::kNonNegative)
      ->capture_default_str();
  options.resume = cmd->add_option("--resume",
                                   "Continue a run: PATH is a checkpoint or a run directory; "
                                   "alone, the newest <project>/*/weights/last.safetensors. The "
                                   "run keeps its directory, configuration (flags that differ "
                                   "are refused; more --epochs are applied) and devices (unless "
                                   "--device or --nproc-per-node is given)")
                       ->expected(0, 1);
  cmd->add_option("--max-steps", t.max_steps,
                  "End after N optimizer steps in all, with a resumable weights/last.safetensors "
                  "(not saved in the configuration)")
      ->check(cli::kPositiveSteps);
  cmd->add_flag("--no-val,--noval", options.no_val, "Validate only the final epoch");
  cmd->add_flag("--noplots", options.no_plots,
                "Write no pictures (results.png, curves, batches) into the run directory");
  cmd->add_flag("--nosave", t.nosave,
                "Write no checkpoint before the run ends (its last epoch, an early stop, "
                "--max-steps), then last and best once, as YOLOv5 (not with --save-period, "
                "--save-steps or --max-restarts)");
  cmd->add_flag("--no-tensorboard", options.no_tensorboard,
                "Write no TensorBoard events file into the run directory");
  cmd->add_flag("--noautoanchor", options.no_autoanchor,
                "Train the model's anchors as they are: no AutoAnchor at the start of a new run "
                "(which checks them against the labels and, when they fit poorly, evolves new "
                "ones)");
  cmd->add_option("--config", options.config,
                  "A yaml of flags (key: value, e.g. epochs: 30); the command line wins")
      ->check(CLI::ExistingFile);
  cli::refuse_flags(cmd, cli::yolov5_train_refusals());  // after every flag bareyolo has
}

std::optional<int> run_train_command(const CLI::App& app) {
  if (app.got_subcommand("train")) return train();
  return std::nullopt;
}

}  // namespace bareyolo
