// data/plane_resize.h — bilinear resize of one float plane as PyTorch's
// F.interpolate(mode='bilinear', align_corners=False) computes it (YOLOv5's --multi-scale calls
// it on the float batch).
//
// align_corners=False lines up the pixel centres of the two grids rather than their corner
// pixels: output column x samples the input at src = (x + 0.5) * in_width / out_width - 0.5,
// clamped at 0 (so the first input pixel repeats before its centre), between input columns
// floor(src) and the next one (the last one repeats past the end), weighted 1 - frac and frac;
// rows the same; the two passes' weights multiply. The scale and the source coordinate are
// floats, as PyTorch computes them for float tensors.
#pragma once

namespace bareyolo::data {

// `in` is in_height rows of in_width floats, `out` out_height rows of out_width floats.
void resize_plane_bilinear(const float* in, int in_width, int in_height, float* out, int out_width,
                           int out_height);

}  // namespace bareyolo::data
