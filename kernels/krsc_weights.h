// kernels/krsc_weights.h — where a channels-last graph's convolution weights lie in the bf16
// copies of the parameter arena: in KRSC order (cuDNN's NHWC filter format), while the float
// arena keeps YOLOv5's KCRS. The one cast that writes the copies (ops::round_weights_to_bf16)
// transposes them as it rounds, so no convolution copies its weight at every call.
#pragma once

#include <cstdint>

#include "kernels/view.h"  // BAREYOLO_HOST_DEVICE

namespace bareyolo::ops {

// A segment: elements [offset, offset + out_channels * in_channels * area) of the copies hold a
// (out_channels, in_channels, kernel area) weight in KRSC order, rounded from the KCRS weight at
// the same offset of the values. The op takes segments as kSegmentFields int64 each, in that
// order, sorted by offset.
inline constexpr int64_t kSegmentFields = 4;

// The value that copy element e rounds: its KCRS element inside a segment, e itself elsewhere
// (a binary search for the last segment starting at or before e: a model has ~60 segments).
BAREYOLO_HOST_DEVICE inline int64_t krsc_source(const int64_t* segments, int64_t count, int64_t e) {
  int64_t after = 0, end = count;  // after: the first segment starting beyond e
  while (after < end) {
    const int64_t middle = (after + end) / 2;
    if (segments[kSegmentFields * middle] <= e)
      after = middle + 1;
    else
      end = middle;
  }
  if (after == 0) return e;
  const int64_t* s = segments + kSegmentFields * (after - 1);
  const int64_t local = e - s[0], out_channels = s[1], channels = s[2], area = s[3];
  const int64_t per_output = channels * area;
  if (local >= out_channels * per_output) return e;  // between segments
  const int64_t k = local / per_output, rest = local - k * per_output;
  const int64_t a = rest / channels, c = rest - a * channels;  // KRSC: kernel position, channel
  return s[0] + k * per_output + c * area + a;
}

}  // namespace bareyolo::ops
