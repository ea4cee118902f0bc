// bench/gpu_train.cpp — bench_gpu_train: training images per second of yolov5s at 640 x 640,
// batch 64, on one GPU, against PyTorch YOLOv5 on the same GPU in the same run, and the model's
// TFLOP/s as a fraction of a bf16 GEMM's.
//
//   bench_gpu_train [--cfg models/yolov5s.yaml] [--imgsz 640] [--batch 64] [--warmup 5]
//                   [--steps 20] [--rounds 3] [--no-torch] [--no-compile] [--peer-limit 90]
//                   [--quick]
//   --quick: 128 px, batch 8, 1 warm-up and 2 timed steps, 1 round, a 2048^3 GEMM (the smoke)
//   --no-compile: the peer's eager modes only (torch.compile spends a minute or more of GPU
//                 time compiling; tools/gpu_check.sh skips it)
//   --peer-limit S: the seconds the peer may take to start, and to answer a round (torch.compile's
//                   first: 600), before it is killed and its figures are absent
//
// Ours: the trainer's step (the Solver, models/train/solver.h) on device 0 in seven modes, taking
// turns: float32, TF32 (--tf32 on) and mixed precision (--amp: bf16 activations, the
// convolutions on cuDNN's bf16 tensor cores; docs/mixed_precision.md) with the fastest of
// cuDNN's deterministic algorithms (--cudnn deterministic, the default), mixed precision with the
// fastest of all (--cudnn fast), and mixed precision again with the step recorded as CUDA graphs
// and replayed (--cuda-graph, kernels/step_graph.h, deterministic), and mixed precision with
// channels-last activations (--channels-last on: every op on its channels-last kernel,
// docs/gpu.md), deterministic and fast. Each mode runs on a model and Solver built as the
// trainer builds them for its options (--amp keeps the bf16 weight copies, in the layout of
// --channels-last), one per precision, layout and recording, each giving its memory back after
// its turn; a mode that fails is reported and the others go on. The step: forward, YOLOv5's loss
// normalised by this batch's counts, backward, clip to norm 10, SGD with Nesterov momentum over
// YOLOv5's three groups (hyp.scratch-low's schedule from its first iteration), zero_grad, the EMA
// update. One optimizer step per batch (nbs = the batch; at batch 64 the trainer's accumulate is 1
// too). The batch is made once and stays on the GPU (random pixels in [0, 1), bench::kBoxesPerImage
// random boxes per image), so no loader or upload is timed. The peer, bench/torch_gpu_train.py:
// PyTorch YOLOv5's own Model, ComputeLoss, smart_optimizer and ModelEMA with train.py's step (AMP
// float16 + GradScaler, clip 10, EMA) in five modes: eager NCHW and eager channels-last, each fast
// (cudnn.benchmark) and deterministic (torch.use_deterministic_algorithms(True), as YOLOv5's
// train.py asks), and torch.compile (channels-last, fast). Started once, it runs one round of a
// mode per command, so the engines take turns (ours, then each peer mode, --rounds times), each
// freeing its device memory before the other's turn, and torch compiles once. Like is paired with
// like: ours AMP deterministic against the peer's faster deterministic eager layout
// (ratio_det_vs_torch_det), ours AMP fast against its faster fast eager layout
// (ratio_fast_vs_torch_fast): both eager, both mixed precision, the same determinism, ours in
// its faster layout too (NCHW or channels last).
// Figures: images/s = batch / the median step of a round (--steps after --warmup; host clock
// around a step with the device synchronised), then the median over the rounds; the RESULT's
// eager figures are the faster eager layout's. Model TFLOP/s = 3 x the forward FLOPs per image
// (2 c_out c_in k^2 h_out w_out summed over the convolutions) x images/s, against cuBLAS's bf16
// GEMM (fp32 accumulation) timed first: tflops_fraction = model / GEMM. Also printed: each
// engine's first step (cuDNN's search, torch.compile's compilation), peak device memory, our
// step's phases, and per precision what our timed steps made the host and the GPU do:
//   ours float32: host waits <w> per step, launches <l> per step (<n> timed steps)
// host waits: inside the step (the step guard's count, kernels/step_guard.h), where the goal is
// 0; launches: kernel launches and library calls queued (cuda::launches), each a fixed cost of
// host time, however small the kernel.
// Without a usable GPU it prints why and exits 77 (skipped), or 1 where a GPU is required
// (gpu_required: BAREYOLO_REQUIRE_GPU, or a driver installed).
// Last line (ours_img_s and ours_launches_per_step are float32's, tflops_fraction the fastest
// mode's, ours_host_waits_per_step the most of our seven modes'; t is the peer's fast eager AMP,
// d its deterministic one):
//   RESULT ours_img_s=<x> ours_tf32_img_s=<y> ours_amp_img_s=<z> torch_eager_amp_img_s=<t>
//          torch_compile_img_s=<c> ratio_vs_torch=<x/t> ratio_amp_vs_torch=<z/t>
//          tflops_fraction=<f> ours_host_waits_per_step=<w> ours_launches_per_step=<l>
//          ours_amp_graph_img_s=<g> ratio_amp_graph_vs_torch=<g/t>
//          ours_graph_launches_per_step=<m> ours_amp_fast_img_s=<a> torch_eager_det_img_s=<d>
//          ratio_det_vs_torch_det=<max(z,n)/d> ratio_fast_vs_torch_fast=<max(a,q)/t>
//          ours_amp_channels_last_img_s=<n> ours_amp_fast_channels_last_img_s=<q>
// (a peer figure that could not be measured is `absent`, its reason on the line before, and a
// ratio of it `nan`). The figures and RESULT are printed after our modes of round 1 and again
// after every round, so a run stopped at a time limit keeps its last RESULT; the final one is
// the last line.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "bench/gpu_bench.h"        // defines: exit_without_gpu
#include "bench/python_peer.h"      // defines: find_python_running
#include "bench/synthetic_batch.h"  // defines: synthetic_batch (made on the GPU here)
#include "bench/train_options.h"    // defines: TrainBenchOptions, parse_train_bench_options
#include "engine/layers/conv2d.h"   // defines: Conv2d (its shapes give the FLOPs)
#include "engine/shipped_files.h"   // defines: find_shipped_file
#include "kernels/cuda/runtime/allocator.h"  // defines: memory_stats, empty_cache, DeviceBuffer
#include "kernels/cuda/runtime/check.h"      // defines: BAREYOLO_CUDA_CHECK
#include "kernels/cuda/runtime/cublas.h"     // defines: cublas_handle, BAREYOLO_CUBLAS_CHECK_LAUNCH
#include "kernels/cuda/runtime/runtime.h"    // defines: device_count, synchronize, launches
#include "kernels/settings.h"                // defines: ops::use_settings (TF32)
#include "kernels/step_guard.h"              // defines: step_guard::count (host waits)
#include "models/train/options.h"            // defines: TrainOptions (the trainer's defaults)
#include "models/train/solver.h"             // defines: Solver (the trainer's step)

extern char** environ;

using namespace bareyolo;
using namespace bareyolo::models;

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kDevice = 0;
const Device kGpu = Device::cuda(kDevice);
constexpr int kBreakdownSteps = 3;
constexpr int kGemmWarmup = 3, kGemmReps = 10;
constexpr double kTrainingFlopsPerForward = 3;  // forward + backward-data + backward-weight

const char kUsage[] =
    "bench_gpu_train [--cfg models/yolov5s.yaml] [--imgsz 640] [--batch 64] [--warmup 5]\n"
    "                [--steps 20] [--rounds 3] [--no-torch] [--no-compile] [--peer-limit 90]\n"
    "                [--quick]\n"
    "  --quick: 128 px, batch 8, 1 warm-up and 2 timed steps, 1 round, a 2048^3 GEMM\n"
    "  --no-compile: the PyTorch peer's eager modes only\n"
    "  --peer-limit S: seconds the peer may take to start or to answer a round (a compile\n"
    "                  round: 600) before it is killed\n";

struct Options : bench::TrainBenchOptions {
  int gemm_size = 8192;   // the bf16 GEMM's m = n = k; 2048 with --quick
  bool compile = true;    // the peer's torch.compile mode; --no-compile skips it
  int peer_limit_s = 90;  // --peer-limit
};
const bench::TrainBenchOptions kDefaults{
    .cfg = "models/yolov5s.yaml", .imgsz = 640, .batch = 64, .warmup = 5, .steps = 20, .rounds = 3};
const bench::TrainBenchOptions kQuick{
    .imgsz = 128, .batch = 8, .warmup = 1, .steps = 2, .rounds = 1};

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// nan for no values.
double median(std::vector<double> values) {
  if (values.empty()) return std::nan("");
  std::sort(values.begin(), values.end());
  const size_t mid = values.size() / 2;
  return values.size() % 2 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

std::string fixed(double value, int decimals = 1) {
  char text[32];
  std::snprintf(text, sizeof text, "%.*f", decimals, value);
  return text;
}

double gigabytes(size_t bytes) { return double(bytes) / 1e9; }

// ---- the work: the model's FLOPs and the GEMM ceiling ---------------------------------------

// Forward FLOPs of one image at imgsz x imgsz through every convolution of `model`, 2 x c_out x
// c_in x k^2 x h_out x w_out each (groups are always 1 here). A node's convolutions run at the
// node's output size: YOLOv5's blocks (C3, Bottleneck, SPPF) never stride, and a strided Conv
// is a node of its own, as the check holds.
double conv_flops_per_image(DetectionModel& model, int imgsz) {
  Graph& graph = model.graph();
  const std::vector<Shape4> shapes = graph.shapes({1, 3, imgsz, imgsz});
  double flops = 0;
  for (int node = 0; node < graph.size(); ++node) {
    if (!graph.module(node)) continue;  // a Concat computes nothing
    std::vector<const Conv2d*> convs;
    for_each_module(*graph.module(node), [&](Module& module) {
      if (const auto* conv = dynamic_cast<const Conv2d*>(&module)) convs.push_back(conv);
    });
    const Shape4& out = shapes[size_t(node)];
    for (const Conv2d* conv : convs) {
      const Conv2dOptions& c = conv->options();
      if (c.stride != 1 && convs.size() > 1)
        throw std::logic_error(graph.name(node) +
                               " strides inside a block: its output size is not the block's");
      flops += 2.0 * c.c_out * c.c_in * c.kernel * c.kernel * double(out.h * out.w);
    }
  }
  return flops;
}

// TFLOP/s of cuBLAS's bf16 GEMM (bf16 inputs and output, fp32 accumulation: the tensor cores'
// dense path) on n x n x n: the median of kGemmReps runs after kGemmWarmup, each timed by
// events on the compute stream. The practical compute ceiling of this GPU.
double bf16_gemm_tflops(int n) {
  const size_t elements = size_t(n) * size_t(n), bytes = elements * sizeof(uint16_t);
  // Random values in [-1, 1): a GEMM of zeros draws less power and may clock higher than work.
  std::vector<uint16_t> matrix(elements);
  uint32_t state = 1;
  for (uint16_t& value : matrix) {
    state = state * 1664525u + 1013904223u;
    const float uniform = float(state >> 8) / float(1 << 24) * 2.0f - 1.0f;
    value = uint16_t(std::bit_cast<uint32_t>(uniform) >> 16);  // bf16: float's top half
  }
  cuda::DeviceBuffer a(bytes, kDevice), b(bytes, kDevice), c(bytes, kDevice);
  cuda::copy(a.get(), matrix.data(), bytes, cuda::CopyKind::host_to_device, kDevice);
  cuda::copy(b.get(), matrix.data(), bytes, cuda::CopyKind::host_to_device, kDevice);
  const float alpha = 1, beta = 0;
  auto gemm = [&] {
    BAREYOLO_CUBLAS_CHECK_LAUNCH(cublasGemmEx(cuda::cublas_handle(kDevice), CUBLAS_OP_N,
                                              CUBLAS_OP_N, n, n, n, &alpha, a.get(), CUDA_R_16BF, n,
                                              b.get(), CUDA_R_16BF, n, &beta, c.get(), CUDA_R_16BF,
                                              n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  };
  for (int rep = 0; rep < kGemmWarmup; ++rep) gemm();
  auto stream = static_cast<cudaStream_t>(cuda::compute_stream(kDevice));
  cudaEvent_t start, stop;
  BAREYOLO_CUDA_CHECK(cudaEventCreate(&start));
  BAREYOLO_CUDA_CHECK(cudaEventCreate(&stop));
  std::vector<double> seconds;
  for (int rep = 0; rep < kGemmReps; ++rep) {
    BAREYOLO_CUDA_CHECK(cudaEventRecord(start, stream));
    gemm();
    BAREYOLO_CUDA_CHECK(cudaEventRecord(stop, stream));
    BAREYOLO_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    BAREYOLO_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    seconds.push_back(ms / 1e3);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return 2.0 * std::pow(double(n), 3) / median(seconds) / 1e12;
}

// ---- ours ---------------------------------------------------------------------------------

// What timed steps made the host and the GPU do, summed over the steps: host waits inside the
// steps (the step guard's count; the bench's own synchronise between steps is outside them)
// and launches (kernel launches and library calls queued, cuda::launches).
struct StepWork {
  uint64_t host_waits = 0, launches = 0;
  int64_t steps = 0;

  double host_waits_per_step() const {
    return double(host_waits) / double(std::max<int64_t>(1, steps));
  }
  double launches_per_step() const {
    return double(launches) / double(std::max<int64_t>(1, steps));
  }
};

uint64_t host_waits_in_steps() { return step_guard::count(step_guard::Event::host_wait); }

// What a trainer's Solver is built for, as the trainer's options build it: --amp keeps the bf16
// weight copies in the layout of --channels-last, and --cuda-graph records the step.
struct Precision {
  bool amp = false, channels_last = false, cuda_graph = false;
};

// bareyolo's training step on the GPU, the trainer's (models/train/solver.h), on one batch made
// once: hyp.scratch-low's schedule and update, one optimizer step per batch (nbs = the batch),
// in a run long enough (kScheduleEpochs) that the learning rate stays the schedule's.
class OurTrainer {
 public:
  OurTrainer(const Options& options, const ModelConfig& config, const TrainOptions& defaults,
             Precision precision)
      : batch_size_(options.batch),
        model_(config, {.device = kGpu}),
        solver_(model_,
                {.schedule = defaults.schedule,
                 .weight_decay = defaults.weight_decay,
                 .epochs = kScheduleEpochs,
                 .batches_per_epoch = kScheduleBatches,
                 .batch = options.batch,
                 .nbs = options.batch,
                 .loss = {scale_loss_gains(defaults.loss, model_.num_levels(), model_.num_classes(),
                                           options.imgsz),
                          model_.num_classes()},
                 .amp = precision.amp,
                 .cuda_graph = precision.cuda_graph ? CudaGraphMode::on : CudaGraphMode::off,
                 .channels_last = precision.channels_last}),
        batch_(
            bench::synthetic_batch(options.batch, options.imgsz, model_.num_classes(), 0, kGpu)) {}

  DetectionModel& model() { return model_; }
  // The first step this trainer took: cuDNN's algorithm search and the first allocations.
  double first_step_s() const { return first_step_s_; }

  // The median seconds of `steps` steps after `warmup`; the timed steps' work is added to
  // `work`.
  double round_seconds(int warmup, int steps, StepWork& work) {
    std::vector<double> seconds;
    for (int index = 0; index < warmup + steps; ++index) {
      cuda::synchronize(kDevice);
      const uint64_t waits_before = host_waits_in_steps(), launches_before = cuda::launches();
      const auto start = Clock::now();
      step();
      cuda::synchronize(kDevice);
      const double elapsed = seconds_since(start);
      if (std::isnan(first_step_s_)) first_step_s_ = elapsed;
      if (index < warmup) continue;
      seconds.push_back(elapsed);
      work.host_waits += host_waits_in_steps() - waits_before;
      work.launches += cuda::launches() - launches_before;
      ++work.steps;
    }
    return median(seconds);
  }

  // The step's phases, the device synchronised after each (median ms of kBreakdownSteps):
  // forward_backward's one-process body (models/train/step.cpp) split in three, then the
  // Solver's update.
  std::string breakdown() {
    constexpr std::array<const char*, 4> kPhases = {"forward", "loss (targets on the host)",
                                                    "backward", "update (clip, SGD, EMA)"};
    std::array<std::vector<double>, kPhases.size()> ms;
    for (int rep = 0; rep < kBreakdownSteps; ++rep) {
      cuda::synchronize(kDevice);
      auto start = Clock::now();
      size_t phase = 0;
      auto lap = [&] {
        cuda::synchronize(kDevice);
        ms[phase++].push_back(1e3 * seconds_since(start));
        start = Clock::now();
      };
      const std::vector<Tensor>& head = model_.forward(batch_.images, Mode::train);
      lap();
      const LevelTargets targets = head_targets(model_, head, batch_.labels, loss_options());
      const HeadLoss loss =
          head_loss(head, targets, local_normalization(targets, batch_size_, kGpu), loss_options());
      lap();
      model_.backward(loss.gradients);
      lap();
      solver_.update();
      lap();
    }
    std::string line;
    for (size_t phase = 0; phase < kPhases.size(); ++phase)
      line += std::string(phase ? ", " : "") + kPhases[phase] + " " + fixed(median(ms[phase]));
    return line + " ms";
  }

  // Hands its recordings, activations and cached device memory back, so that the next turn has
  // the GPU to itself (the next steps plan them again, and record again, in their warm-up).
  void release() {
    solver_.drop_recordings();
    model_.graph().release_activations();
    cuda::empty_cache(kDevice);
  }

 private:
  void step() { solver_.step(batch_.images, batch_.labels, iteration_++); }
  const LossOptions& loss_options() const { return solver_.options().loss; }

  static constexpr int kScheduleEpochs = 300;
  static constexpr int64_t kScheduleBatches = 1000;
  int batch_size_;
  DetectionModel model_;
  Solver solver_;
  bench::SyntheticBatch batch_;  // made once, on the GPU
  int64_t iteration_ = 0;
  double first_step_s_ = std::nan("");
};

// ---- the PyTorch peer -----------------------------------------------------------------------

// The value of `key=` in a PEER_ line: up to the next space, or to the end for `reason=`;
// "" when the line has none.
std::string field(const std::string& line, const std::string& key) {
  const size_t at = line.find(" " + key + "=");
  if (at == std::string::npos) return "";
  const size_t begin = at + key.size() + 2;
  return key == "reason" ? line.substr(begin) : line.substr(begin, line.find(' ', begin) - begin);
}

// The file load_model_config reads for `cfg`: the path as given, else the shipped yaml of that
// name (models/yolov5s.yaml from any folder), for the peer to open.
std::string model_yaml_path(const std::string& cfg) {
  std::error_code error;
  return std::filesystem::is_regular_file(cfg, error) ? cfg : find_shipped_file(cfg).value_or(cfg);
}

// bench/torch_gpu_train.py in --serve mode, started once: one round of a mode per line sent
// to its stdin, answered by a PEER_ROUND line on its stdout. Everything it prints is shown
// here prefixed "torch: ".
class TorchPeer {
 public:
  // Starts the peer and waits until it is ready; absent() says why when it cannot run.
  TorchPeer(const Options& options, int classes) : limit_(options.peer_limit_s) {
    const std::string python = bench::find_python_running("import torch");
    if (python.empty()) {
      absent_ = "no Python that imports torch (install PyTorch with CUDA, and the yolov5 package)";
      return;
    }
    const std::optional<std::string> script = find_shipped_file("bench/torch_gpu_train.py");
    if (!script) {
      absent_ = "bench/torch_gpu_train.py is not among the shipped files (set BAREYOLO_HOME)";
      return;
    }
    // -I: the current folder and PYTHON* stay out; -u: each line arrives as it is printed.
    spawn({python, "-I", "-u", *script, "--serve", "--cfg", model_yaml_path(options.cfg), "--nc",
           std::to_string(classes), "--imgsz", std::to_string(options.imgsz), "--batch",
           std::to_string(options.batch), "--warmup", std::to_string(options.warmup), "--steps",
           std::to_string(options.steps)});
    const Clock::time_point deadline = Clock::now() + limit_;
    for (std::string line; absent_.empty() && next_line(line, deadline);) {
      if (line.rfind("PEER_READY", 0) == 0) return;
      if (line.rfind("PEER_ABSENT", 0) == 0) absent_ = field(line, "reason");
    }
    if (absent_.empty()) absent_ = ended("before it was ready");
  }
  ~TorchPeer() {
    if (to_peer_ >= 0) ::close(to_peer_);  // the end of its input: the peer returns
    const Clock::time_point deadline = Clock::now() + kExitLimit;
    for (std::string line; from_peer_ >= 0 && next_line(line, deadline);) {
    }
    if (from_peer_ >= 0) ::close(from_peer_);
    if (pid_ > 0) ::waitpid(pid_, nullptr, 0);
  }
  TorchPeer(const TorchPeer&) = delete;
  TorchPeer& operator=(const TorchPeer&) = delete;

  // Why the peer cannot run (any more); "" while it can.
  const std::string& absent() const { return absent_; }

  // Runs one round of `mode`; its PEER_ROUND line, or "" when the peer is gone (see absent()).
  std::string round(const std::string& mode) {
    if (!absent_.empty()) return "";
    const std::string command = mode + "\n";
    if (::write(to_peer_, command.data(), command.size()) != ssize_t(command.size())) {
      absent_ = ended("while waiting for a command");
      return "";
    }
    const Clock::time_point deadline =
        Clock::now() + (mode == "compile" ? std::max(limit_, kCompileRoundLimit) : limit_);
    for (std::string line; next_line(line, deadline);)
      if (line.rfind("PEER_ROUND", 0) == 0) return line;
    absent_ = ended("during a round of " + mode);
    return "";
  }

 private:
  void spawn(const std::vector<std::string>& argv) {
    int to_child[2], from_child[2];
    if (::pipe(to_child) != 0) throw std::runtime_error("pipe() failed for the torch peer");
    if (::pipe(from_child) != 0) throw std::runtime_error("pipe() failed for the torch peer");
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, to_child[0], STDIN_FILENO);
    posix_spawn_file_actions_adddup2(&actions, from_child[1], STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&actions, from_child[1], STDERR_FILENO);
    for (int fd : {to_child[0], to_child[1], from_child[0], from_child[1]})
      posix_spawn_file_actions_addclose(&actions, fd);
    std::vector<char*> args;
    for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
    args.push_back(nullptr);
    const int failed = ::posix_spawnp(&pid_, args[0], &actions, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(to_child[0]);
    ::close(from_child[1]);
    to_peer_ = to_child[1];
    from_peer_ = from_child[0];
    if (failed) {
      pid_ = -1;
      absent_ = argv[0] + " could not be started: " + std::strerror(failed);
    }
  }

  // Reads the peer's next line of output into `line` (without its newline) and echoes it;
  // false at the end of its output. The end is also the peer's exit with the pipe still open:
  // processes it started (torch.compile's workers) may hold its write end after it died. A peer
  // still silent at `deadline` is killed (a hung peer must not take our figures with it).
  bool next_line(std::string& line, Clock::time_point deadline) {
    while (unread_.find('\n') == std::string::npos) {
      if (Clock::now() > deadline && pid_ > 0) {
        ::kill(pid_, SIGKILL);
        killed_ = true;
      }
      pollfd readable{from_peer_, POLLIN, 0};
      const int ready = ::poll(&readable, 1, kExitCheckMs);
      if (ready < 0 && errno == EINTR) continue;
      if (ready == 0) {
        if (exited()) break;
        continue;
      }
      char chunk[4096];
      const ssize_t length = ::read(from_peer_, chunk, sizeof chunk);
      if (length < 0 && errno == EINTR) continue;
      if (length <= 0) break;
      unread_.append(chunk, size_t(length));
    }
    if (unread_.empty()) return false;
    const size_t end = std::min(unread_.find('\n'), unread_.size());
    line = unread_.substr(0, end);
    unread_.erase(0, end + 1);
    std::printf("torch: %s\n", line.c_str());
    return true;
  }

  // Whether the peer has exited (reaping it, its status kept); never blocks.
  bool exited() {
    if (pid_ > 0 && ::waitpid(pid_, &exit_status_, WNOHANG) == pid_) pid_ = -1;
    return pid_ <= 0;
  }

  // The peer has ended `when`: its exit status as a reason.
  std::string ended(const std::string& when) {
    if (pid_ > 0 && ::waitpid(pid_, &exit_status_, 0) == pid_) pid_ = -1;
    if (killed_)
      return "bench/torch_gpu_train.py gave no answer in time " + when +
             " and was killed; its output is above";
    return "bench/torch_gpu_train.py exited " + when + " (" +
           (WIFSIGNALED(exit_status_) ? "signal " + std::to_string(WTERMSIG(exit_status_))
                                      : "status " + std::to_string(WEXITSTATUS(exit_status_))) +
           "); its output is above";
  }

  static constexpr int kExitCheckMs = 1000;  // how often a silent peer is checked for an exit
  // How long the peer may take to start (import torch and YOLOv5, build a model) and to run
  // one round (its first step's cuDNN search included): --peer-limit; torch.compile's round (its
  // compilation) at least kCompileRoundLimit; and to exit once its input ends.
  std::chrono::seconds limit_;
  static constexpr std::chrono::seconds kCompileRoundLimit{600}, kExitLimit{20};
  bool killed_ = false;
  pid_t pid_ = -1;
  int exit_status_ = 0;
  int to_peer_ = -1, from_peer_ = -1;  // pipe ends: its stdin, its stdout and stderr
  std::string unread_;                 // output read but not yet returned as lines
  std::string absent_;
};

// One of the peer's modes over the rounds.
struct PeerMode {
  PeerMode(const char* command, const char* label) : command(command), label(label) {}

  const char* command;  // as torch_gpu_train.py names it
  const char* label;
  std::vector<double> rates;  // images/s, one per round
  double first_step_s = std::nan(""), peak_reserved_gb = std::nan("");
  std::string absent;  // why its rounds stopped (or never began); "" while they run

  // The median over the rounds it ran (a peer that died later keeps them); nan with none.
  double rate() const { return median(rates); }
  // A round's PEER_ROUND line, or "" when the peer could not run it because `peer_absent`.
  void record(const std::string& line, const std::string& peer_absent) {
    absent = line.empty() ? peer_absent : field(line, "reason");
    if (!absent.empty()) return;
    rates.push_back(std::atof(field(line, "img_s").c_str()));
    if (field(line, "step1_s") != "-") first_step_s = std::atof(field(line, "step1_s").c_str());
    peak_reserved_gb =
        std::fmax(peak_reserved_gb, std::atof(field(line, "peak_reserved_gb").c_str()));
  }
};

// One of our modes over the rounds: a trainer (its precision, layout, recording) and the kernel
// settings it runs under.
struct OurMode {
  OurMode(const char* label, OurTrainer* trainer, bool tf32, bool deterministic)
      : label(label), trainer(trainer), tf32(tf32), deterministic(deterministic) {}

  const char* label;
  OurTrainer* trainer;
  bool tf32;                  // --tf32 on
  bool deterministic;         // --cudnn deterministic (else fast)
  std::vector<double> rates;  // images/s, one per round it finished
  StepWork work;              // over every round's timed steps
  std::string failed;         // why a round failed, if one did

  double rate() const { return median(rates); }  // nan with no round finished
};

// ---- the report ---------------------------------------------------------------------------

std::string rate_or_absent(double rate) { return std::isnan(rate) ? "absent" : fixed(rate, 2); }
std::string ratio_or_nan(double ratio) { return std::isnan(ratio) ? "nan" : fixed(ratio, 3); }

// Where each mode sits in the arrays main() fills.
enum Ours {
  kFloat32,
  kTf32,
  kAmp,
  kAmpFast,
  kAmpGraph,
  kAmpChannelsLast,
  kAmpFastChannelsLast,
  kOurModes
};
enum Peer { kNchwFast, kNhwcFast, kNchwDet, kNhwcDet, kCompile, kPeerModes };

// The faster of two layouts of a peer mode; with neither measured, the first (its reason).
const PeerMode& faster(const PeerMode& nchw, const PeerMode& nhwc) {
  return std::isnan(nhwc.rate()) || nchw.rate() >= nhwc.rate() ? nchw : nhwc;
}

// Why a peer mode has no figure: its reason, or that its turn has not come yet.
std::string why_absent(const PeerMode& mode) {
  return mode.absent.empty() ? "not run yet" : mode.absent;
}

// The figures over the rounds so far (`so_far` says how far), each engine's TFLOP/s, and the
// RESULT line (a figure that could not be measured is `absent`, its reason on the line before).
void report(const char* so_far, const std::array<OurMode, kOurModes>& ours,
            const std::array<PeerMode, kPeerModes>& peer, double training_flops,
            double gemm_tflops) {
  std::printf("== the figures %s\n", so_far);
  std::array<double, kOurModes> rate{};
  double fastest = std::nan("");  // of the modes that ran
  for (size_t mode = 0; mode < ours.size(); ++mode) {
    rate[mode] = ours[mode].rate();
    fastest = std::fmax(fastest, rate[mode]);
  }
  for (const OurMode& mode : ours)
    std::printf("ours %s: %.1f img/s (median of %zu round(s))%s%s\n", mode.label, mode.rate(),
                mode.rates.size(), mode.failed.empty() ? "" : "; failed: ", mode.failed.c_str());
  double most_host_waits = 0;  // RESULT's: 0 there means no mode's step waited
  for (const OurMode& mode : ours) {
    std::printf("ours %s: host waits %.1f per step, launches %.1f per step (%lld timed steps)\n",
                mode.label, mode.work.host_waits_per_step(), mode.work.launches_per_step(),
                (long long)mode.work.steps);
    most_host_waits = std::max(most_host_waits, mode.work.host_waits_per_step());
  }
  const PeerMode& eager = faster(peer[kNchwFast], peer[kNhwcFast]);
  const PeerMode& eager_det = faster(peer[kNchwDet], peer[kNhwcDet]);
  const PeerMode& compiled = peer[kCompile];
  for (const PeerMode& mode : peer)
    if (mode.rates.empty())
      std::printf("%s: absent (%s)\n", mode.label, why_absent(mode).c_str());
    else
      std::printf(
          "%s: %.1f img/s (median of %zu round(s)%s%s), step 1 %.2f s, peak %.1f GB "
          "reserved\n",
          mode.label, mode.rate(), mode.rates.size(), mode.absent.empty() ? "" : "; then ",
          mode.absent.c_str(), mode.first_step_s, mode.peak_reserved_gb);
  auto tflops = [&](double images_per_s) { return training_flops * images_per_s / 1e12; };
  std::printf("model TFLOP/s (3 x forward FLOPs x img/s): ours at best %.1f (%.3f of the GEMM)",
              tflops(fastest), tflops(fastest) / gemm_tflops);
  for (const PeerMode* mode : {&eager, &compiled})
    if (!mode->rates.empty())
      std::printf(", %s %.1f (%.3f)", mode->label, tflops(mode->rate()),
                  tflops(mode->rate()) / gemm_tflops);
  std::printf("\n");
  if (!eager.rates.empty())
    std::printf(
        "ours float32 / %s (the faster fast eager layout): %.2f; ours AMP: %.2f; ours AMP "
        "replayed: %.2f\n",
        eager.label, rate[kFloat32] / eager.rate(), rate[kAmp] / eager.rate(),
        rate[kAmpGraph] / eager.rate());
  // Like with like, each engine in its faster layout.
  // (fmax: a layout whose mode failed leaves the other's figure)
  const double ours_det = std::fmax(rate[kAmp], rate[kAmpChannelsLast]),
               ours_fast = std::fmax(rate[kAmpFast], rate[kAmpFastChannelsLast]);
  std::printf("like with like: ours AMP deterministic / %s: %s; ours AMP fast / %s: %s\n",
              eager_det.label, ratio_or_nan(ours_det / eager_det.rate()).c_str(), eager.label,
              ratio_or_nan(ours_fast / eager.rate()).c_str());
  std::string why;
  for (const auto& [key, mode] :
       {std::pair{"torch_eager_amp_img_s", &eager}, std::pair{"torch_eager_det_img_s", &eager_det},
        std::pair{"torch_compile_img_s", &compiled}})
    if (mode->rates.empty())
      why += std::string(why.empty() ? "" : "; ") + key + ": " + why_absent(*mode);
  if (!why.empty()) std::printf("absent: %s\n", why.c_str());
  std::printf(
      "RESULT ours_img_s=%.2f ours_tf32_img_s=%.2f ours_amp_img_s=%.2f torch_eager_amp_img_s=%s "
      "torch_compile_img_s=%s ratio_vs_torch=%s ratio_amp_vs_torch=%s tflops_fraction=%.4f "
      "ours_host_waits_per_step=%.2f ours_launches_per_step=%.1f ours_amp_graph_img_s=%.2f "
      "ratio_amp_graph_vs_torch=%s ours_graph_launches_per_step=%.1f ours_amp_fast_img_s=%.2f "
      "torch_eager_det_img_s=%s ratio_det_vs_torch_det=%s ratio_fast_vs_torch_fast=%s "
      "ours_amp_channels_last_img_s=%.2f ours_amp_fast_channels_last_img_s=%.2f\n",
      rate[kFloat32], rate[kTf32], rate[kAmp], rate_or_absent(eager.rate()).c_str(),
      rate_or_absent(compiled.rate()).c_str(), ratio_or_nan(rate[kFloat32] / eager.rate()).c_str(),
      ratio_or_nan(rate[kAmp] / eager.rate()).c_str(), tflops(fastest) / gemm_tflops,
      most_host_waits, ours[kFloat32].work.launches_per_step(), rate[kAmpGraph],
      ratio_or_nan(rate[kAmpGraph] / eager.rate()).c_str(),
      ours[kAmpGraph].work.launches_per_step(), rate[kAmpFast],
      rate_or_absent(eager_det.rate()).c_str(), ratio_or_nan(ours_det / eager_det.rate()).c_str(),
      ratio_or_nan(ours_fast / eager.rate()).c_str(), rate[kAmpChannelsLast],
      rate[kAmpFastChannelsLast]);
}

// --no-compile and --peer-limit are this bench's own; the rest is the options it shares with
// bench_train.
Options parse(int argc, char** argv) {
  Options options;
  std::vector<char*> shared = {argv[0]};
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--no-compile") {
      options.compile = false;
    } else if (std::string(argv[i]) == "--peer-limit") {
      char* end = nullptr;
      const long seconds = i + 1 < argc ? std::strtol(argv[i + 1], &end, 10) : 0;
      if (i + 1 >= argc || *end != '\0' || seconds < 1)
        throw std::invalid_argument(std::string("--peer-limit takes a whole number of seconds >= "
                                                "1, not '") +
                                    (i + 1 < argc ? argv[i + 1] : "") + "'\n" + kUsage);
      options.peer_limit_s = int(seconds);
      ++i;
    } else {
      shared.push_back(argv[i]);
    }
  static_cast<bench::TrainBenchOptions&>(options) = bench::parse_train_bench_options(
      int(shared.size()), shared.data(), kDefaults, kQuick, kUsage);
  if (options.quick) options.gemm_size = 2048;
  return options;
}

}  // namespace

int main(int argc, char** argv) {
  // Line by line even into a file or pipe: a run cut short by a timeout keeps what it printed.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  try {
    const Options options = parse(argc, argv);
    if (const std::optional<int> status = bench::exit_without_gpu("bench_gpu_train"))
      return *status;
    ::signal(SIGPIPE, SIG_IGN);  // a peer that died is a reason to report, not a signal to die of
    cudaDeviceProp device{};
    BAREYOLO_CUDA_CHECK(cudaGetDeviceProperties(&device, kDevice));
    const TrainOptions defaults;  // the trainer's hyperparameters: hyp.scratch-low's
    const ModelConfig config = load_model_config(options.cfg);

    const double gemm_tflops = bf16_gemm_tflops(options.gemm_size);
    cuda::empty_cache(kDevice);
    cuda::device_allocator(kDevice).reset_peaks();  // from here on, the training's memory
    // One trainer per way the trainer's options build a Solver (--amp keeps bf16 weight copies
    // in the layout of --channels-last; --cuda-graph records), each giving its memory back after
    // its turn.
    OurTrainer ours(options, config, defaults, {});
    OurTrainer ours_amp(options, config, defaults, {.amp = true});
    OurTrainer ours_amp_nhwc(options, config, defaults, {.amp = true, .channels_last = true});
    OurTrainer ours_graph(options, config, defaults, {.amp = true, .cuda_graph = true});
    const double forward_flops = conv_flops_per_image(ours.model(), options.imgsz);
    const double training_flops = kTrainingFlopsPerForward * forward_flops;
    std::printf(
        "bench_gpu_train: %s (%.0f GiB), %s (%lld parameters, %d classes) at %dx%d, batch %d; "
        "median of %d steps after %d warm-up, %d round(s)\n",
        device.name, double(device.totalGlobalMem) / (1 << 30), options.cfg.c_str(),
        (long long)ours.model().parameter_count(), ours.model().num_classes(), options.imgsz,
        options.imgsz, options.batch, options.steps, options.warmup, options.rounds);
    std::printf("model: %.2f GFLOP per image forward (convolutions), %.1f per training image\n",
                forward_flops / 1e9, training_flops / 1e9);
    std::printf("bf16 GEMM %d^3 (cuBLAS, fp32 accumulation): %.1f TFLOP/s, median of %d\n",
                options.gemm_size, gemm_tflops, kGemmReps);

    std::optional<TorchPeer> peer;
    if (options.torch) peer.emplace(options, ours.model().num_classes());
    auto peer_absent = [&] { return peer ? peer->absent() : std::string("skipped (--no-torch)"); };
    std::array<PeerMode, kPeerModes> modes = {
        PeerMode("eager_nchw", "torch eager AMP NCHW"),
        PeerMode("eager_channels_last", "torch eager AMP NHWC"),
        PeerMode("eager_nchw_det", "torch eager AMP NCHW deterministic"),
        PeerMode("eager_channels_last_det", "torch eager AMP NHWC deterministic"),
        PeerMode("compile", "torch.compile AMP NHWC")};
    if (!options.compile) modes[kCompile].absent = "skipped (--no-compile)";
    if (const std::string absent = peer_absent(); !absent.empty())
      for (PeerMode& mode : modes) mode.absent = absent;  // a peer that never runs says why
    std::array<OurMode, kOurModes> precisions = {
        OurMode("float32", &ours, false, true),
        OurMode("TF32", &ours, true, true),
        OurMode("AMP (bf16)", &ours_amp, false, true),
        OurMode("AMP (bf16), cuDNN fast", &ours_amp, false, false),
        OurMode("AMP (bf16), CUDA graph", &ours_graph, false, true),
        OurMode("AMP (bf16), channels last", &ours_amp_nhwc, false, true),
        OurMode("AMP (bf16), cuDNN fast, channels last", &ours_amp_nhwc, false, false)};
    for (int round = 1; round <= options.rounds; ++round) {
      std::string line = "round " + std::to_string(round) + ": ours";
      for (OurMode& mode : precisions) {
        ops::use_settings({.tf32 = mode.tf32, .cudnn_deterministic = mode.deterministic});
        // A mode that fails (a recording CUDA refuses, say) is reported and the others go on;
        // a fault of the device itself ends the bench (the synchronise throws it).
        try {
          mode.rates.push_back(options.batch / mode.trainer->round_seconds(
                                                   options.warmup, options.steps, mode.work));
          line += std::string(" ") + mode.label + " " + fixed(mode.rates.back());
        } catch (const std::exception& error) {
          mode.failed = error.what();
          std::printf("ours %s: failed: %s\n", mode.label, error.what());
          cuda::synchronize(kDevice);
          line += std::string(" ") + mode.label + " failed";
        }
        mode.trainer->release();
      }
      ops::use_settings({.tf32 = false});
      line += " img/s";
      if (round == 1) {
        const cuda::MemoryStats memory = cuda::memory_stats(kDevice);
        std::printf(
            "ours: step 1 took %.2f s (cuDNN's algorithm search, first allocations); peak device "
            "memory %.1f GB allocated, %.1f GB reserved\n",
            ours.first_step_s(), gigabytes(memory.peak_allocated), gigabytes(memory.peak_reserved));
        std::printf("ours, phases (synchronised, median of %d): %s\n", kBreakdownSteps,
                    ours.breakdown().c_str());
      }
      ours.release();
      // A run cut short (a time limit) keeps a RESULT of what it measured: ours before the
      // peer's first turn, then everything after each round.
      if (round == 1) report("of our round 1", precisions, modes, training_flops, gemm_tflops);
      for (PeerMode& mode : modes) {
        if (!mode.absent.empty()) continue;
        const std::string reply = peer ? peer->round(mode.command) : "";
        mode.record(reply, peer_absent());  // after the round: it may have ended the peer
        if (mode.absent.empty())
          line += ", " + std::string(mode.label) + " " + fixed(mode.rates.back());
      }
      std::printf("%s\n", line.c_str());
      const std::string so_far =
          "after round " + std::to_string(round) + " of " + std::to_string(options.rounds);
      report(so_far.c_str(), precisions, modes, training_flops, gemm_tflops);
    }
    return 0;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "bench_gpu_train: error: %s\n", error.what());
    return 1;
  }
}
