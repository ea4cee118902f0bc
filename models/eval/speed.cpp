// models/eval/speed.cpp — see speed.h.
#include "models/eval/speed.h"

#include <algorithm>
#include <cstdio>

namespace bareyolo::models {

std::string speed_line(const StageTimes& times, int64_t images,
                       const std::array<int64_t, 4>& shape) {
  const double ms_per_image = 1e3 / double(std::max<int64_t>(images, 1));
  char line[200];
  std::snprintf(line, sizeof line,
                "Speed: %.1fms pre-process, %.1fms inference, %.1fms NMS per image at shape "
                "(%lld, %lld, %lld, %lld)",
                times.pre_process_s * ms_per_image, times.inference_s * ms_per_image,
                times.nms_s * ms_per_image, static_cast<long long>(shape[0]),
                static_cast<long long>(shape[1]), static_cast<long long>(shape[2]),
                static_cast<long long>(shape[3]));
  return line;
}

}  // namespace bareyolo::models
