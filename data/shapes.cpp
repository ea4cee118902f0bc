// data/shapes.cpp — the synthetic shapes dataset (see shapes.h).
#include "data/shapes.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include <yaml-cpp/yaml.h>

#include "data/hsv.h"
#include "data/rng.h"

namespace fs = std::filesystem;

namespace bareyolo::data {

namespace {

// The first line of data.yaml; the number changes whenever the generator draws other images.
constexpr const char* kYamlSignature =
    "# synthetic shapes, generator 2, written by `bareyolo make-shapes`";
constexpr const char* kOlderYamlSignature = "# synthetic shapes, written by `bareyolo make-shapes`";

constexpr int kMaxShapesPerImage = 6;
constexpr double kBackgroundImageShare = 0.05;
constexpr double kMaxOverlapIou = 0.35;  // a new shape may cover others, but not hide them

// Is (u, v) in [-1, 1]^2 (the shape's box) inside shape `cls`?
bool inside(int cls, double u, double v) {
  double r2 = u * u + v * v;
  switch (cls) {
    case 0:
      return r2 <= 1;  // circle (ellipse)
    case 1:
      return true;  // rectangle
    case 2:
      return std::abs(u) <= (v + 1) / 2;  // triangle, apex up
    case 3:
      return std::abs(u) + std::abs(v) <= 1;  // diamond
    case 4:
      return std::abs(u) <= 0.3 || std::abs(v) <= 0.3;  // cross
    default:
      return r2 <= 1 && r2 >= 0.36;  // ring
  }
}

// The background: any hue but weakly saturated, so that it never takes a class's colour.
Rgb background_colour(SampleRng& rng) {
  return hsv_to_rgb(
      {uint8_t(rng.below(180)), uint8_t(rng.below(90)), uint8_t(40 + rng.below(216))});
}

// A base colour, a linear gradient and pixel noise.
Rgb paint_background(Image& image, SampleRng& rng) {
  const Rgb base = background_colour(rng);
  double gx = rng.uniform(-60, 60), gy = rng.uniform(-60, 60);
  int noise = 4 + int(rng.below(24));
  for (int y = 0; y < image.height; ++y)
    for (int x = 0; x < image.width; ++x) {
      double fx = double(x) / image.width - 0.5, fy = double(y) / image.height - 0.5;
      double shade = gx * fx + gy * fy;
      uint8_t* p = image.at(x, y);
      for (int c = 0; c < 3; ++c) {
        double jitter = double(rng.below(uint64_t(2 * noise + 1))) - noise;
        p[c] = uint8_t(std::clamp(base[size_t(c)] + shade + jitter, 0.0, 255.0));
      }
    }
  return base;
}

// A strongly saturated colour from the class's own band of hues, redrawn (a few times at
// most) until it stands out from the background.
Rgb class_colour(SampleRng& rng, int cls, int classes, Rgb background) {
  const double band = 180.0 / classes;
  Rgb colour{};
  for (int attempt = 0; attempt < 16; ++attempt) {
    int hue = int(std::lround(cls * band + rng.uniform(-0.3, 0.3) * band + 180)) % 180;
    colour =
        hsv_to_rgb({uint8_t(hue), uint8_t(150 + rng.below(106)), uint8_t(110 + rng.below(146))});
    int distance = 0;
    for (size_t c = 0; c < 3; ++c) distance += std::abs(int(colour[c]) - int(background[c]));
    if (distance >= 120) break;
  }
  return colour;
}

double iou(const LabelBox& a, const LabelBox& b) {
  double w = std::min(a.cx + a.w / 2, b.cx + b.w / 2) - std::max(a.cx - a.w / 2, b.cx - b.w / 2);
  double h = std::min(a.cy + a.h / 2, b.cy + b.h / 2) - std::max(a.cy - a.h / 2, b.cy - b.h / 2);
  if (w <= 0 || h <= 0) return 0;
  return w * h / (a.w * a.h + b.w * b.h - w * h);
}

void paint_shape(Image& image, const LabelBox& box, Rgb colour) {
  int s = image.width;
  int x1 = int(std::lround((box.cx - box.w / 2) * s)),
      x2 = int(std::lround((box.cx + box.w / 2) * s));
  int y1 = int(std::lround((box.cy - box.h / 2) * s)),
      y2 = int(std::lround((box.cy + box.h / 2) * s));
  for (int y = y1; y < y2; ++y)
    for (int x = x1; x < x2; ++x) {
      double u = (x + 0.5 - x1) / (x2 - x1) * 2 - 1, v = (y + 0.5 - y1) / (y2 - y1) * 2 - 1;
      if (inside(box.class_id, u, v)) std::copy(colour.begin(), colour.end(), image.at(x, y));
    }
}

// A shape box in pixels snapped to whole pixels, so the label is exactly what was painted.
LabelBox random_box(int imgsz, int classes, SampleRng& rng) {
  int cls = int(rng.below(uint64_t(classes)));
  double side = rng.uniform(0.12, 0.4) * imgsz;
  double aspect = rng.uniform(0.6, 1.6);
  int w = std::max(6, int(side * std::sqrt(aspect))),
      h = std::max(6, int(side / std::sqrt(aspect)));
  w = std::min(w, imgsz), h = std::min(h, imgsz);
  int x1 = int(rng.below(uint64_t(imgsz - w + 1))), y1 = int(rng.below(uint64_t(imgsz - h + 1)));
  float s = float(imgsz);
  return {cls, (x1 + w / 2.0f) / s, (y1 + h / 2.0f) / s, w / s, h / s};
}

void write_split(const ShapesOptions& options, const std::string& split, uint64_t split_id,
                 int count) {
  fs::path images = fs::path(options.out) / "images" / split;
  fs::path labels = fs::path(options.out) / "labels" / split;
  fs::create_directories(images);
  fs::create_directories(labels);
  for (int i = 0; i < count; ++i) {
    std::vector<LabelBox> boxes;
    Image image = make_shapes_image(options.imgsz, options.classes, options.seed, split_id,
                                    uint64_t(i), boxes);
    char stem[16];
    std::snprintf(stem, sizeof stem, "%06d", i);
    write_image((images / (std::string(stem) + ".jpg")).string(), image, 92);
    std::ofstream out(labels / (std::string(stem) + ".txt"));
    for (const LabelBox& b : boxes) {
      char line[96];
      std::snprintf(line, sizeof line, "%d %.6f %.6f %.6f %.6f\n", b.class_id, b.cx, b.cy, b.w,
                    b.h);
      out << line;
    }
    if (!out) throw std::runtime_error("cannot write labels in " + labels.string());
  }
}

}  // namespace

const std::vector<std::string>& shape_class_names() {
  static const std::vector<std::string> names = {"circle",  "rectangle", "triangle",
                                                 "diamond", "cross",     "ring"};
  return names;
}

Image make_shapes_image(int imgsz, int classes, uint64_t seed, uint64_t split, uint64_t index,
                        std::vector<LabelBox>& labels) {
  SampleRng rng(seed, split, index);
  Image image(imgsz, imgsz, 0);
  const Rgb background = paint_background(image, rng);
  labels.clear();
  if (rng.chance(kBackgroundImageShare)) return image;
  int wanted = 1 + int(rng.below(kMaxShapesPerImage));
  for (int attempt = 0; attempt < 4 * wanted && int(labels.size()) < wanted; ++attempt) {
    LabelBox box = random_box(imgsz, classes, rng);
    bool hides = std::any_of(labels.begin(), labels.end(), [&](const LabelBox& other) {
      return iou(box, other) > kMaxOverlapIou;
    });
    if (hides) continue;
    paint_shape(image, box, class_colour(rng, box.class_id, classes, background));
    labels.push_back(box);
  }
  return image;
}

ShapesDatasetAge shapes_dataset_age(const std::string& yaml) {
  std::ifstream in(yaml);
  std::string first_line;
  std::getline(in, first_line);
  if (first_line.starts_with(kYamlSignature)) return ShapesDatasetAge::current;
  if (first_line.starts_with(kOlderYamlSignature)) return ShapesDatasetAge::older;
  return ShapesDatasetAge::not_shapes;
}

std::string make_shapes_dataset(const ShapesOptions& options) {
  const int max_classes = int(shape_class_names().size());
  if (options.classes < 1 || options.classes > max_classes)
    throw std::invalid_argument("--classes " + std::to_string(options.classes) + " is not in 1.." +
                                std::to_string(max_classes));
  if (options.imgsz < 32) throw std::invalid_argument("--imgsz must be at least 32");
  if (options.n_train < 1 || options.n_val < 1)
    throw std::invalid_argument("--n-train and --n-val must be at least 1");
  write_split(options, "train", 0, options.n_train);
  write_split(options, "val", 1, options.n_val);
  fs::path yaml = fs::path(options.out) / "data.yaml";
  // An absolute `path`: YOLOv5 resolves a relative one against its own install folder and
  // Ultralytics against its datasets folder, so only an absolute one opens the set in both.
  YAML::Emitter root;  // quotes the folder where yaml needs it (a ": " or "#" in the name)
  root << fs::canonical(options.out).string();
  std::ofstream out(yaml);
  out << kYamlSignature << " (seed " << options.seed << ")\n"
      << "path: " << root.c_str()
      << "\ntrain: images/train\nval: images/val\nnc: " << options.classes << "\nnames:\n";
  for (int c = 0; c < options.classes; ++c) out << "  - " << shape_class_names()[size_t(c)] << "\n";
  if (!out) throw std::runtime_error("cannot write " + yaml.string());
  return yaml.string();
}

}  // namespace bareyolo::data
