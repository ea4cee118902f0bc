// data/shapes.h — the built-in synthetic dataset (`bareyolo make-shapes`): solid shapes of
// random sizes, aspect ratios and positions, overlapping a little, on noisy gradient
// backgrounds, written as a real YOLO dataset:
//
//   OUT/images/{train,val}/NNNNNN.jpg   OUT/labels/{train,val}/NNNNNN.txt   OUT/data.yaml
//
// Classes, in order: circle, rectangle, triangle, diamond, cross, ring (--classes picks the
// first k). Each class is painted in its own band of hues (strongly saturated, on a weakly
// saturated background), so colour as well as outline tells the classes apart. Why: YOLOv5
// scales its class loss by nc / 80, and with random colours a from-scratch yolov5n does not
// learn 4 classes by outline alone within the main job's 80 epochs — measured: bareyolo and
// PyTorch YOLOv5 alike stay at the class-blind ceiling (precision ≈ 1/nc, mAP50 ≈ 0.25-0.35).
// Each shape touches all four sides of its box, so the label is exact. About one image in 20
// has no shape (a background image). Everything follows from the seed: image i of a split is
// drawn from SampleRng(seed, split, i), so the files do not depend on threads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/image.h"
#include "data/label_file.h"

namespace bareyolo::data {

struct ShapesOptions {
  std::string out;
  int n_train = 400;
  int n_val = 100;
  int imgsz = 128;
  int classes = 4;
  uint64_t seed = 0;
};

const std::vector<std::string>& shape_class_names();  // all six

// One synthetic image and its labels (exposed for tests and the trainer's in-memory use).
Image make_shapes_image(int imgsz, int classes, uint64_t seed, uint64_t split, uint64_t index,
                        std::vector<LabelBox>& labels);

// Who wrote the dataset of `yaml`: this generator, an older one (other images: regenerate it),
// or not make-shapes at all (e.g. the user's own data in that folder).
enum class ShapesDatasetAge { current, older, not_shapes };
ShapesDatasetAge shapes_dataset_age(const std::string& yaml);

// Writes the dataset; returns the path of its data.yaml. Throws std::invalid_argument for
// bad options and std::runtime_error when OUT cannot be written.
std::string make_shapes_dataset(const ShapesOptions& options);

}  // namespace bareyolo::data
