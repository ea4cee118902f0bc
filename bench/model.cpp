// bench/model.cpp — forward and training-step (forward + backward) time per image of a YOLOv5
// model on the CPU, beside the model's convolution GFLOPs and the rate reached.
//
//   bench_model [--cfg models/yolov5n.yaml] [--imgsz 320] [--batch 8] [--reps 3] [--quick]
//               [--winograd on|off]
//
// FLOPs are counted from shapes: a convolution with weight (c_out, c_in, k, k) producing an
// h x w map costs 2 * c_out * c_in * k * k * h * w per image forward, and a training step
// adds the two backward products of the same size (3x). In YOLOv5 every convolution of a
// graph node runs at that node's output resolution, which gives h and w. Those are the direct
// convolution's FLOPs also where Winograd (kernels/cpu/winograd.h, on unless --winograd off)
// does fewer (where its measured rule picks it): the rates are effective ones, comparable
// between the two.
// Then the train step's per-op profile (kernels/op_profile.h) at 1 and 2 threads: each op's
// calls, milliseconds and share of the step, GFLOP/s for the convolutions, and the 1 -> 2
// thread speed-up, and at 2 threads the share of the op's thread-time that no thread spent
// on its work ("idle": waiting in its parallel loops, or beside its serial parts:
// op_profile::idle_share), so that what a second thread fails to give splits into idle time
// and slower work;
// "outside ops" is the rest of the step (allocation, copies, the graph);
// under it, the host's memory bandwidth at 1 and 2 threads (bench/memory_bandwidth.h), the
// ceiling of the memory-bound ops' speed-up, and its FMA throughput at 1 and 2 threads
// (bench/compute_throughput.h), the ceiling of every op's.
// Last line: RESULT fwd_ms_per_img=<x> train_ms_per_img=<y> gflops_per_s=<z>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <random>
#include <string>

#include "bench/compute_throughput.h"
#include "bench/memory_bandwidth.h"
#include "engine/shipped_files.h"
#include "kernels/cpu/cache_sizes.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/cpu/winograd.h"
#include "kernels/op_profile.h"
#include "models/yolo/yolo_model.h"

using namespace bareyolo;
using namespace bareyolo::models;

namespace {

// The convolutions' forward GFLOPs per image of the nodes [first, last).
double forward_gflops_per_image(DetectionModel& model, Shape4 input, int first = 0, int last = -1) {
  const std::vector<Shape4> shapes = model.graph().shapes(input);
  const std::vector<StateEntry> state = model.state();
  double flops = 0;
  for (int node = first; node < (last < 0 ? model.graph().size() : last); ++node) {
    const std::string& prefix = model.graph().name(node);
    for (const StateEntry& e : state)
      if (e.dims.size() == 4 && e.name.rfind(prefix, 0) == 0)
        flops += 2.0 * double(e.dims[0] * e.dims[1] * e.dims[2] * e.dims[3]) *
                 double(shapes[size_t(node)].plane());
  }
  return flops / 1e9;
}

struct Profile {
  std::map<std::string, op_profile::Totals> ops;  // summed over `steps`
  double step_seconds = 0;                        // summed over `steps`
  int steps = 0;
};

// `steps` profiled train steps (after one unprofiled) at `threads` threads.
template <class Step>
Profile profile_steps(int threads, int steps, const Step& step) {
  ThreadPool::global().resize(threads);
  step();
  Profile profile;
  profile.steps = steps;
  op_profile::take();
  op_profile::enable(true);
  const auto start = std::chrono::steady_clock::now();
  for (int s = 0; s < steps; ++s) step();
  profile.step_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  op_profile::enable(false);
  profile.ops = op_profile::take();
  return profile;
}

// The per-op table of two profiles (1 and 2 threads), slowest op first. `conv_gflops` gives
// the GFLOPs per step of the convolution ops (the others get no rate).
void print_profiles(const Profile& one, const Profile& two,
                    const std::map<std::string, double>& conv_gflops) {
  std::vector<std::pair<std::string, op_profile::Totals>> rows(one.ops.begin(), one.ops.end());
  std::sort(rows.begin(), rows.end(),
            [](const auto& a, const auto& b) { return a.second.seconds > b.second.seconds; });
  std::printf("%-34s %6s | %9s %6s %8s | %9s %6s %8s %6s | %7s\n", "op (train step)", "calls",
              "1 thr ms", "share", "GFLOP/s", "2 thr ms", "share", "GFLOP/s", "idle", "1->2");
  auto columns = [](const Profile& p, double seconds, double gflops) {
    const double ms = seconds / p.steps * 1e3;
    std::printf(" | %9.2f %5.1f%% ", ms, 100 * seconds / p.step_seconds);
    if (gflops > 0)
      std::printf("%8.1f", gflops * p.steps / seconds);
    else
      std::printf("%8s", "");
  };
  // The 2 threads' idle share (blank where not measured: outside the ops).
  auto idle_column = [](const op_profile::Totals* totals) {
    if (totals)
      std::printf(" %5.1f%%", 100 * op_profile::idle_share(*totals, 2));
    else
      std::printf(" %6s", "");
  };
  double one_in_ops = 0, two_in_ops = 0;
  op_profile::Totals two_all_ops;  // summed, for the step's idle share
  for (const auto& [op, totals] : rows) {
    const auto found = two.ops.find(op);
    const op_profile::Totals two_totals =
        found == two.ops.end() ? op_profile::Totals{} : found->second;
    const auto flops = conv_gflops.find(op);
    const double gflops = flops == conv_gflops.end() ? 0 : flops->second;
    std::printf("%-34s %6lld", op.c_str(), (long long)(totals.calls / one.steps));
    columns(one, totals.seconds, gflops);
    columns(two, two_totals.seconds, gflops);
    idle_column(&two_totals);
    std::printf(" | %6.2fx\n", totals.seconds / two_totals.seconds);
    one_in_ops += totals.seconds, two_in_ops += two_totals.seconds;
    two_all_ops.pool_loop_seconds += two_totals.pool_loop_seconds;
    two_all_ops.pool_wait_seconds += two_totals.pool_wait_seconds;
  }
  // The step: its time outside the ops counts as one thread's (an upper bound: the gradient
  // zeroing there runs on the pool, but its loops belong to no op).
  two_all_ops.seconds = two.step_seconds;
  std::printf("%-34s %6s", "outside ops", "");
  columns(one, one.step_seconds - one_in_ops, 0);
  columns(two, two.step_seconds - two_in_ops, 0);
  idle_column(nullptr);
  std::printf(" | %6.2fx\n", (one.step_seconds - one_in_ops) / (two.step_seconds - two_in_ops));
  std::printf("%-34s %6s", "train step", "");
  columns(one, one.step_seconds, 0);
  columns(two, two.step_seconds, 0);
  idle_column(&two_all_ops);
  std::printf(" | %6.2fx\n", one.step_seconds / two.step_seconds);
}

// Best of `reps` timings of fn, in seconds.
template <class Fn>
double best_time(int reps, Fn fn) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    auto start = std::chrono::steady_clock::now();
    fn();
    best = std::min(
        best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  std::string cfg = shipped_file("models/yolov5n.yaml");
  int image_size = 320, batch = 8, reps = 3;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--cfg" && has_value)
      cfg = argv[++i];
    else if (arg == "--imgsz" && has_value)
      image_size = std::stoi(argv[++i]);
    else if (arg == "--batch" && has_value)
      batch = std::stoi(argv[++i]);
    else if (arg == "--reps" && has_value)
      reps = std::stoi(argv[++i]);
    else if (arg == "--quick")
      image_size = 128, batch = 2, reps = 1;
    else if (arg == "--winograd" && has_value)
      cpu::set_winograd_use(std::string(argv[++i]) == "off" ? cpu::WinogradUse::kNever
                                                            : cpu::WinogradUse::kMeasuredRule);
    else {
      std::fprintf(stderr, "bench_model: unknown argument '%s'\n", arg.c_str());
      return 2;
    }
  }
  DetectionModel model(load_model_config(cfg));
  const Shape4 input = {batch, 3, image_size, image_size};
  std::mt19937 rng(0);
  std::uniform_real_distribution<float> pixel(0, 1);
  std::vector<float> values(size_t(input.numel()));
  for (float& v : values) v = pixel(rng);
  const Tensor images = Tensor::from_vector(values, input);

  std::vector<Tensor> grads;  // d loss / d head outputs: a fixed random seed gradient
  for (const Tensor& out : model.forward(images, Mode::train)) {
    std::vector<float> g(size_t(out.numel()));
    for (float& v : g) v = pixel(rng) - 0.5f;
    grads.push_back(Tensor::from_vector(g, out.shape()));
  }
  const double gflops = forward_gflops_per_image(model, input);
  const int threads = ThreadPool::global().num_threads();
  std::printf("%s at %dx%d, batch %d, %d threads, Winograd %s: %.3f GFLOP per image forward\n",
              cfg.c_str(), image_size, image_size, batch, threads,
              cpu::winograd_use() == cpu::WinogradUse::kNever ? "off" : "on", gflops);
  const cpu::CacheSizes& caches = cpu::cache_sizes();
  std::printf("caches the CPU kernels size their blocks by: L1d %lld KB, L2 %lld KB, L3 %lld MB\n",
              (long long)(caches.l1d >> 10), (long long)(caches.l2 >> 10),
              (long long)(caches.l3 >> 20));

  const double forward_s = best_time(reps, [&] { model.forward(images, Mode::eval); });
  const double train_s = best_time(reps, [&] {
    model.forward(images, Mode::train);
    model.backward(grads);
  });
  const double fwd_ms = forward_s / batch * 1e3, train_ms = train_s / batch * 1e3;
  const double train_rate = 3 * gflops * batch / train_s;
  std::printf("forward        %8.2f ms/image  %6.1f GFLOP/s\n", fwd_ms, gflops * batch / forward_s);
  std::printf(
      "train step     %8.2f ms/image  %6.1f GFLOP/s (forward + backward, 3x the forward FLOPs)\n",
      train_ms, train_rate);

  // Every convolution runs forward and weight-gradient products of the same size; the
  // data gradient skips model.0's (the images need none).
  const double step_gflops = gflops * batch;
  const double first_node_gflops = forward_gflops_per_image(model, input, 0, 1) * batch;
  const std::map<std::string, double> conv_gflops = {
      {"conv2d_forward", step_gflops},
      {"conv2d_backward_weight", step_gflops},
      {"conv2d_backward_data", step_gflops - first_node_gflops}};
  auto train_step = [&] {
    model.forward(images, Mode::train);
    model.backward(grads);
  };
  const Profile one = profile_steps(1, reps, train_step);
  const Profile two = profile_steps(2, reps, train_step);
  ThreadPool::global().resize(threads);
  print_profiles(one, two, conv_gflops);
  const bench::MemoryScaling memory = bench::measure_memory_scaling();
  std::printf("memory bandwidth: %.1f GB/s at 1 thread, %.1f at 2 (%.2fx)\n", memory.one_thread,
              memory.two_threads, memory.ratio());
  const bench::ComputeScaling compute = bench::measure_compute_scaling();
  std::printf("FMA throughput: %.1f GFLOP/s at 1 thread, %.1f at 2 (%.2fx)\n", compute.one_thread,
              compute.two_threads, compute.ratio);
  std::printf("RESULT fwd_ms_per_img=%.3f train_ms_per_img=%.3f gflops_per_s=%.1f\n", fwd_ms,
              train_ms, train_rate);
  return 0;
}
