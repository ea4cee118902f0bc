// data/copy_paste.h — YOLOv5's copy-paste (Ghiasi et al., https://arxiv.org/abs/2012.07177) on a
// mosaic canvas, between the mosaic and the random perspective.
//
// round(p * n) of the canvas's n objects (Python's round: halves to even) are drawn without
// replacement, in random order. Each is mirrored left-right across the canvas (x -> width - x)
// and pasted there, unless its mirrored box would cover 30 % or more of a box already on the
// canvas (the intersection over that box's area; a pasted box counts from its paste on). A
// pasted object's pixels are the mirror image of the pixels inside its outline — its polygon,
// or its box when its label has none — read from the canvas as it was before any paste. It
// adds a label: the same class, the mirrored box and the mirrored polygon (none for a box).
//
// YOLOv5 pastes only objects with polygons; here a box label pastes its box (docs/
// augmentation.md). Draws nothing when p is 0 or the canvas has no object.
#pragma once

#include <vector>

#include "data/boxes.h"
#include "data/image.h"
#include "data/rng.h"

namespace bareyolo::data {

// A pasted box may cover less than this share of each box already there (YOLOv5's 0.30).
inline constexpr double kMaxCoverOfExistingBox = 0.30;

// `segments`: one polygon per box (empty for a box without), in pixels, as build_mosaic makes
// them; pasted objects are appended to both.
void copy_paste(Image& canvas, std::vector<PixelBox>& boxes, std::vector<Polygon>& segments,
                double probability, SampleRng& rng);

}  // namespace bareyolo::data
