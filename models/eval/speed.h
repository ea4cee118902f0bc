// models/eval/speed.h — how long prediction's three stages take per image, and the line YOLOv5's
// detect.py and val.py end with:
//
//   Speed: 0.3ms pre-process, 12.1ms inference, 0.9ms NMS per image at shape (1, 3, 640, 640)
//
// The stages are YOLOv5's: pre-process is turning the loaded, letterboxed image(s) into the
// network's float input on its device (reading and letterboxing are the loader's, untimed, as
// there); inference is the forward pass; NMS is Detect's decode and NMS. Each stage waits for
// the device's queued work before its clock stops, as YOLOv5's Profile synchronises CUDA:
// otherwise a GPU's forward would be counted in whichever later stage first waits for it.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <string>

#include "kernels/device_memory.h"

namespace bareyolo::models {

// Seconds spent in each stage, summed over the images.
struct StageTimes {
  double pre_process_s = 0, inference_s = 0, nms_s = 0;
};

// Runs `work`, waits for `device` to finish what it queued, adds the seconds to `total_s` and
// returns what `work` returned.
template <typename Work>
auto timed_stage(double& total_s, const Device& device, Work&& work) {
  const auto start = std::chrono::steady_clock::now();
  auto result = work();
  wait_for_device(device);
  total_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

// "Speed: Xms pre-process, Yms inference, Zms NMS per image at shape (B, 3, H, W)": the
// milliseconds per image (of `images`; all 0.0 without one) at one decimal, and the input's
// shape as val.py prints it (its batch size, then the square inference size).
std::string speed_line(const StageTimes& times, int64_t images,
                       const std::array<int64_t, 4>& shape);

}  // namespace bareyolo::models
