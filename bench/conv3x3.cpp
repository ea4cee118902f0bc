// bench/conv3x3.cpp — bench_conv3x3: the CPU's 3x3 stride-1 convolutions by im2col + GEMM and by
// Winograd F(2x2, 3x3) (kernels/cpu/winograd.h), in the same run, on the bottleneck shapes of
// YOLOv5 (n and s, 320 and 640) and a few narrower ones; the data behind winograd_chosen's rule.
//
// Each row: forward, data gradient and weight gradient in milliseconds per image, both ways, the
// speed-up of the three passes together, and what the rule picks per pass (W: Winograd, i:
// im2col). Best of --reps timed runs of a batch, on the threads of $BAREYOLO_THREADS (default:
// the cores).
// Last line: RESULT winograd_speedup=<s> rule_misses=<m>
//   winograd_speedup: the yolov5n@320 shapes' summed time direct over their time as the rule
//   picks; rule_misses: the passes where the rule's pick is more than 10% slower than the other
//   (this host's run-to-run noise is about 10%).
//
//   bench_conv3x3 [--batch 8] [--reps 3] [--quick] [--only <text in the shape's name>]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/thread_pool.h"
#include "kernels/cpu/winograd.h"
#include "kernels/ops.h"

using namespace bareyolo;

namespace {

struct Shape {
  const char* where;
  int64_t channels, size;  // c_in = c_out, square map
  bool yolov5n_320;        // counted in winograd_speedup
};

const Shape kShapes[] = {
    {"yolov5n@320 model.2", 16, 80, true},   {"yolov5n@320 model.4", 32, 40, true},
    {"yolov5n@320 model.6", 64, 20, true},   {"yolov5n@320 model.8", 128, 10, true},
    {"yolov5n@640 model.2", 16, 160, false}, {"yolov5s@320 model.2", 32, 80, false},
    {"yolov5s@320 model.6", 128, 20, false}, {"yolov5s@320 model.8", 256, 10, false},
    {"narrow 8 @80", 8, 80, false},          {"narrow 8 @20", 8, 20, false},
    {"yolov5s@640 model.8", 256, 20, false}, {"small map 64 @5", 64, 5, false},
};

using Clock = std::chrono::steady_clock;

template <class F>
double best_seconds(int reps, F run) {
  run();  // warm-up: scratch buffers, packed panels
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto start = Clock::now();
    run();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - start).count());
  }
  return best;
}

struct PassTimes {
  double forward, data, weight;
  double total() const { return forward + data + weight; }
  double of(int pass) const { return pass == 0 ? forward : pass == 1 ? data : weight; }
};

PassTimes time_passes(const Shape& s, int64_t batch, int reps, cpu::WinogradUse use) {
  cpu::set_winograd_use(use);
  const Shape4 xs{batch, s.channels, s.size, s.size}, ws{s.channels, s.channels, 3, 3};
  const ops::Conv2dParams same{1, 1, 1, 1};
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> value(-1, 1);
  auto random = [&](int64_t n) {
    std::vector<float> v(static_cast<size_t>(n));
    for (float& e : v) e = value(rng);
    return v;
  };
  std::vector<float> x = random(xs.numel()), w = random(ws.numel()), dy = random(xs.numel());
  std::vector<float> y(xs.numel()), dx(xs.numel()), dw(ws.numel());
  auto xv = dense_view<const float>(x.data(), xs), wv = dense_view<const float>(w.data(), ws);
  auto dyv = dense_view<const float>(dy.data(), xs);
  PassTimes t;
  t.forward = best_seconds(
      reps, [&] { ops::conv2d_forward<float>(xv, wv, nullptr, same, dense_view(y.data(), xs)); });
  t.data = best_seconds(
      reps, [&] { ops::conv2d_backward_data<float>(dyv, wv, same, dense_view(dx.data(), xs)); });
  t.weight = best_seconds(reps, [&] {
    ops::conv2d_backward_weight<float>(xv, dyv, same, dense_view(dw.data(), ws), nullptr);
  });
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t batch = 8;
  int reps = 3;
  bool quick = false;
  std::string only;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--batch" && has_value)
      batch = std::stoi(argv[++i]);
    else if (arg == "--reps" && has_value)
      reps = std::stoi(argv[++i]);
    else if (arg == "--only" && has_value)
      only = argv[++i];
    else if (arg == "--quick")
      quick = true, batch = 2, reps = 1;
    else {
      std::fprintf(stderr, "bench_conv3x3: unknown argument '%s'\n", arg.c_str());
      return 2;
    }
  }
  std::printf(
      "3x3 stride-1 convolutions, batch %lld, %d threads, ms per image "
      "(forward / data gradient / weight gradient)\n",
      static_cast<long long>(batch), ThreadPool::global().num_threads());
  std::printf("%-22s %5s %24s %24s %7s %s\n", "shape", "ch", "im2col + GEMM", "Winograd", "speedup",
              "rule");
  double direct_sum = 0, chosen_sum = 0;
  int misses = 0;
  for (const Shape& s : kShapes) {
    if (quick && s.channels * s.size > 1300) continue;
    if (std::string(s.where).find(only) == std::string::npos) continue;
    const PassTimes direct = time_passes(s, batch, reps, cpu::WinogradUse::kNever);
    const PassTimes winograd = time_passes(s, batch, reps, cpu::WinogradUse::kAlways);
    cpu::set_winograd_use(cpu::WinogradUse::kMeasuredRule);
    const cpu::ConvGeometry g{s.channels, s.size, s.size, 3, 3, 1, 1, 1, 1, s.size, s.size};
    const cpu::ConvPass passes[] = {cpu::ConvPass::kForward, cpu::ConvPass::kDataGradient,
                                    cpu::ConvPass::kWeightGradient};
    std::string picks;
    for (int pass = 0; pass < 3; ++pass) {
      const bool chosen = cpu::winograd_chosen(g, s.channels, passes[pass]);
      picks += chosen ? 'W' : 'i';
      const double picked = chosen ? winograd.of(pass) : direct.of(pass);
      const double other = chosen ? direct.of(pass) : winograd.of(pass);
      if (picked > 1.1 * other) ++misses;
      if (s.yolov5n_320) direct_sum += direct.of(pass), chosen_sum += picked;
    }
    const double per_image = 1e3 / double(batch);
    std::printf("%-22s %5lld %7.3f %7.3f %7.3f  %7.3f %7.3f %7.3f  %6.2fx %s\n", s.where,
                static_cast<long long>(s.channels), direct.forward * per_image,
                direct.data * per_image, direct.weight * per_image, winograd.forward * per_image,
                winograd.data * per_image, winograd.weight * per_image,
                direct.total() / winograd.total(), picks.c_str());
  }
  std::printf("RESULT winograd_speedup=%.3f rule_misses=%d\n",
              chosen_sum > 0 ? direct_sum / chosen_sum : 0.0, misses);
  return 0;
}
