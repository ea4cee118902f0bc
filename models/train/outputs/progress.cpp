// models/train/outputs/progress.cpp — see progress.h.
#include "models/train/outputs/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <memory>
#include <optional>

namespace bareyolo::models {

namespace {

// A 10-character bar with eighths of a cell, in ASCII ('#' full, a digit partial).
std::string bar_text(double fraction) {
  const int eighths = int(std::clamp(fraction, 0.0, 1.0) * 80);
  std::string bar(size_t(eighths / 8), '#');
  if (bar.size() < 10 && eighths % 8) bar += char('0' + eighths % 8);
  bar.resize(10, ' ');
  return bar;
}

}  // namespace

std::string clock_text(double seconds) {
  const int64_t s = std::max<int64_t>(0, std::llround(seconds));
  char text[32];
  if (s >= 3600)
    std::snprintf(text, sizeof text, "%lld:%02lld:%02lld", static_cast<long long>(s / 3600),
                  static_cast<long long>(s / 60 % 60), static_cast<long long>(s % 60));
  else
    std::snprintf(text, sizeof text, "%02lld:%02lld", static_cast<long long>(s / 60),
                  static_cast<long long>(s % 60));
  return text;
}

bool is_terminal(std::FILE* stream) { return ::isatty(::fileno(stream)) == 1; }

int64_t resident_memory_bytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t pages_total = 0, pages_resident = 0;
  if (!(statm >> pages_total >> pages_resident)) return 0;
  return pages_resident * int64_t(::sysconf(_SC_PAGESIZE));
}

ProgressBar::ProgressBar(std::FILE* out, bool interactive, std::string epoch_label, int64_t total,
                         int64_t start)
    : out_(out),
      interactive_(interactive),
      label_(std::move(epoch_label)),
      total_(std::max<int64_t>(total, 1)),
      start_(start),
      began_(std::chrono::steady_clock::now()),
      last_draw_(began_) {}

std::string ProgressBar::header() {
  char text[128];
  std::snprintf(text, sizeof text, "%11s%11s%11s%11s%11s%11s%11s", "Epoch", "RSS", "box_loss",
                "obj_loss", "cls_loss", "Instances", "Size");
  return text;
}

std::string ProgressBar::row(int64_t done, const ProgressFields& f) const {
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - began_).count();
  const double rate = done > start_ && elapsed > 0 ? double(done - start_) / elapsed : 0;
  const double eta = rate > 0 ? double(total_ - done) / rate : 0;
  char memory[32];
  std::snprintf(memory, sizeof memory, "%.3gG", double(resident_memory_bytes()) / 1e9);
  char text[256];
  std::snprintf(text, sizeof text,
                "%11s%11s%11.4g%11.4g%11.4g%11lld%11d %3d%%|%s| %lld/%lld [%s<%s, %.2fit/s]",
                label_.c_str(), memory, f.box, f.obj, f.cls, static_cast<long long>(f.instances),
                f.size, int(100 * done / total_), bar_text(double(done) / double(total_)).c_str(),
                static_cast<long long>(done), static_cast<long long>(total_),
                clock_text(elapsed).c_str(), clock_text(eta).c_str(), rate);
  return text;
}

void ProgressBar::update(int64_t done, const ProgressFields& fields) {
  last_done_ = done;
  last_fields_ = fields;
  const auto now = std::chrono::steady_clock::now();
  const double since_draw = std::chrono::duration<double>(now - last_draw_).count();
  if (interactive_) {
    if (done < total_ && drawn_ && since_draw < 0.1) return;
    std::fprintf(out_, "\r%s", row(done, fields).c_str());
  } else {
    const int64_t decile = done * 10 / total_;
    if (decile == last_printed_decile_ && since_draw < 30) return;
    last_printed_decile_ = decile;
    std::fprintf(out_, "%s\n", row(done, fields).c_str());
  }
  std::fflush(out_);
  drawn_ = true;
  last_draw_ = now;
}

void ProgressBar::finish() {
  if (interactive_) {
    if (drawn_) std::fprintf(out_, "\n");
  } else if (last_done_ >= 0 && last_printed_decile_ != 10) {
    std::fprintf(out_, "%s\n", row(last_done_, last_fields_).c_str());
  }
  std::fflush(out_);
}

TrainCallbacks progress_bar(std::FILE* out) {
  auto bar = std::make_shared<std::optional<ProgressBar>>();
  TrainCallbacks callbacks;
  callbacks.on_train_epoch_start = [out, bar](const EpochStartInfo& e) {
    std::fprintf(out, "%s\n", ProgressBar::header().c_str());
    bar->emplace(out, is_terminal(out),
                 std::to_string(e.epoch + 1) + "/" + std::to_string(e.epochs), e.batches,
                 e.batches_done);
  };
  callbacks.on_train_batch_end = [bar](const BatchEndInfo& b) {
    if (*bar)
      (*bar)->update(b.batches_done,
                     {b.loss_mean[0], b.loss_mean[1], b.loss_mean[2], b.instances, b.image_size});
  };
  auto finish = [bar] {
    if (*bar) (*bar)->finish();
    bar->reset();
  };
  callbacks.on_epoch_end = [finish](int) { finish(); };
  callbacks.on_train_end = [finish](const TrainEndInfo&) { finish(); };
  return callbacks;
}

}  // namespace bareyolo::models
