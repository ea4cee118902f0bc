// data/stage_clock.h — where a training sample's CPU time goes, for bench_data_loader's table:
// each stage of the pipeline is wrapped in a StageTimer, which adds the calling thread's CPU
// time to a process-wide total for its stage while the clock is on (off: one relaxed load).
// The loader's threads all add to the same totals, so the table is per-sample CPU time
// whatever the worker count.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace bareyolo::data {

// decode: reading and decoding an image file; resize: to the training size; place: the
// mosaic's tiles; warp: the random perspective (the flips folded in); hsv; batch: collate.
enum class Stage { decode, resize, place, warp, hsv, batch };
inline constexpr int kStageCount = 6;
const char* stage_name(Stage stage);

struct StageSeconds {
  std::array<double, kStageCount> seconds{};
  double operator[](Stage stage) const { return seconds[std::size_t(stage)]; }
};

// Turns the clock on (and zeroes its totals) or off.
void run_stage_clock(bool on);
// The totals since the clock was last turned on.
StageSeconds stage_seconds();

class StageTimer {
 public:
  explicit StageTimer(Stage stage);
  ~StageTimer();
  StageTimer(const StageTimer&) = delete;
  StageTimer& operator=(const StageTimer&) = delete;

 private:
  Stage stage_;
  int64_t start_ns_ = -1;  // -1: the clock was off
};

}  // namespace bareyolo::data
