// data/mosaic.h — YOLOv5's 4-image mosaic on a 2s x 2s canvas (s = imgsz) filled with 114.
//
// Draws, in order: the centre yc then xc, each int(U(s/2, 3s/2)); three partner images
// uniformly from the whole dataset; a shuffle of the four. Tile t of size (w, h) goes to the
// quadrant t around (xc, yc) — 0 top-left, 1 top-right, 2 bottom-left, 3 bottom-right — cut at
// the canvas edge. Boxes move with their tile and are clipped to [0, 2s], and so do the
// polygons of labels that have them (`segments`: one per box, empty for a box without). The
// caller then applies copy-paste and random_perspective with border -s/2, which makes it s x s.
//
// The canvas is not drawn: a Mosaic holds the four images and where they lie (a TiledCanvas),
// and the warp samples them directly; only copy-paste, which pastes onto it, renders it.
#pragma once

#include <array>
#include <vector>

#include "data/boxes.h"
#include "data/dataset.h"
#include "data/image.h"
#include "data/rng.h"
#include "data/warp.h"

namespace bareyolo::data {

struct Mosaic {
  std::array<Dataset::Pixels, 4> images;
  TiledCanvas canvas;  // its tiles point at `images`' pixels, which stay put when they move

  Mosaic() = default;
  Mosaic(Mosaic&&) = default;
  Mosaic& operator=(Mosaic&&) = default;
  Mosaic(const Mosaic&) = delete;  // a copy's tiles would point into the original
  Mosaic& operator=(const Mosaic&) = delete;
};

Mosaic build_mosaic(const Dataset& dataset, int64_t index, int imgsz, SampleRng& rng,
                    std::vector<PixelBox>& boxes, std::vector<Polygon>& segments);

}  // namespace bareyolo::data
