// data/shapes.h — the built-in synthetic dataset (`bareyolo make-shapes`): solid shapes in
// random colours, sizes, aspect ratios and positions, overlapping a little, on noisy and
// textured backgrounds, written as a real YOLO dataset:
//
//   OUT/images/{train,val}/NNNNNN.jpg   OUT/labels/{train,val}/NNNNNN.txt   OUT/data.yaml
//
// Classes, in order: circle, rectangle, triangle, diamond, cross, ring (--classes picks the
// first k). Each shape touches all four sides of its box, so the label is exact. About one
// image in 20 has no shape (a background image). Everything follows from the seed: image i of
// a split is drawn from SampleRng(seed, split, i), so the files do not depend on threads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/image.h"
#include "data/label_file.h"

namespace bareyolo::data {

struct ShapesOptions {
  std::string out;
  int n_train = 512;
  int n_val = 128;
  int imgsz = 256;
  int classes = 4;
  uint64_t seed = 0;
};

const std::vector<std::string>& shape_class_names();  // all six

// One synthetic image and its labels (exposed for tests and the trainer's in-memory use).
Image make_shapes_image(int imgsz, int classes, uint64_t seed, uint64_t split, uint64_t index,
                        std::vector<LabelBox>& labels);

// Writes the dataset; returns the path of its data.yaml. Throws std::invalid_argument for
// bad options and std::runtime_error when OUT cannot be written.
std::string make_shapes_dataset(const ShapesOptions& options);

}  // namespace bareyolo::data
