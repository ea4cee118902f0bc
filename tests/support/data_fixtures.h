// tests/support/data_fixtures.h — what the data tests share: a temporary folder that removes
// itself, and small YOLO datasets written into it (real image files, label files, data.yaml).
#pragma once

#include <stdlib.h>

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "data/image.h"
#include "data/label_file.h"
#include "data/raster.h"

namespace bareyolo::testing {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "bareyolo-test-XXXXXX").string();
    REQUIRE(mkdtemp(pattern.data()) != nullptr);
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    fs::permissions(path_, fs::perms::owner_all, fs::perm_options::add, ignored);
    for (const auto& entry : fs::recursive_directory_iterator(path_, ignored))
      if (entry.is_directory(ignored))  // a test's symlink loop must not throw here
        fs::permissions(entry.path(), fs::perms::owner_all, fs::perm_options::add, ignored);
    fs::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

inline void write_text(const fs::path& file, const std::string& text) {
  fs::create_directories(file.parent_path());
  std::ofstream out(file, std::ios::binary);
  out << text;
  REQUIRE(out.good());
}

// An image with a dark background and, for each box, a white filled rectangle where the box
// is — so a test can check that labels still sit on their objects after augmentation.
inline data::Image boxes_image(int width, int height, const std::vector<data::LabelBox>& boxes) {
  data::Image image(width, height, 0);
  for (const data::LabelBox& b : boxes) {
    int x1 = int((b.cx - b.w / 2) * width + 0.5f), x2 = int((b.cx + b.w / 2) * width + 0.5f);
    int y1 = int((b.cy - b.h / 2) * height + 0.5f), y2 = int((b.cy + b.h / 2) * height + 0.5f);
    for (int y = y1; y < y2; ++y)
      for (int x = x1; x < x2; ++x) std::fill(image.at(x, y), image.at(x, y) + 3, uint8_t(255));
  }
  return image;
}

inline std::string label_text(const std::vector<data::LabelBox>& boxes) {
  std::string text;
  for (const data::LabelBox& b : boxes)
    text += std::to_string(b.class_id) + " " + std::to_string(b.cx) + " " + std::to_string(b.cy) +
            " " + std::to_string(b.w) + " " + std::to_string(b.h) + "\n";
  return text;
}

// Writes root/images/<split>/<stem>.png (lossless, so pixels are exact) and its label file.
inline void add_image(const fs::path& root, const std::string& split, const std::string& stem,
                      int width, int height, const std::vector<data::LabelBox>& boxes) {
  fs::create_directories(root / "images" / split);
  data::write_image((root / "images" / split / (stem + ".png")).string(),
                    boxes_image(width, height, boxes));
  write_text(root / "labels" / split / (stem + ".txt"), label_text(boxes));
}

inline std::string write_yaml(const fs::path& root, int nc) {
  std::string names;
  for (int c = 0; c < nc; ++c) names += (c ? ", " : "") + std::string("c") + std::to_string(c);
  write_text(root / "data.yaml",
             "path: .\ntrain: images/train\nval: images/val\nnames: [" + names + "]\n");
  return (root / "data.yaml").string();
}

// A dataset of `count` train images (sizes vary) with 1-3 white boxes each, and 2 val images.
inline std::string make_box_dataset(const fs::path& root, int count, int nc = 3) {
  for (int i = 0; i < count; ++i) {
    std::vector<data::LabelBox> boxes;
    for (int k = 0; k <= i % 3; ++k)
      boxes.push_back(
          {(i + k) % nc, 0.2f + 0.25f * k, 0.3f + 0.1f * (i % 4), 0.15f + 0.02f * k, 0.2f});
    add_image(root, "train", "im" + std::to_string(i), 160 + 16 * (i % 5), 120 + 8 * (i % 3),
              boxes);
  }
  add_image(root, "val", "v0", 200, 100, {{0, 0.5f, 0.5f, 0.4f, 0.4f}});
  add_image(root, "val", "v1", 90, 180, {{1, 0.5f, 0.5f, 0.3f, 0.2f}});
  return write_yaml(root, nc);
}

// A labelled object drawn as a white polygon: its class and normalised points.
struct PolygonObject {
  int class_id = 0;
  data::Polygon points;
};

// Writes root/images/<split>/<stem>.png with the objects white on black and its label file in
// YOLOv5's segment format (`class x1 y1 x2 y2 ...`).
inline void add_polygon_image(const fs::path& root, const std::string& split,
                              const std::string& stem, int width, int height,
                              const std::vector<PolygonObject>& objects) {
  data::Image image(width, height, 0);
  std::string text;
  for (const PolygonObject& object : objects) {
    data::Polygon pixels;
    text += std::to_string(object.class_id);
    for (const data::Point& p : object.points) {
      pixels.push_back({p.x * float(width), p.y * float(height)});
      text += " " + std::to_string(p.x) + " " + std::to_string(p.y);
    }
    text += "\n";
    data::polygon_spans(pixels, width, height, [&](int y, int x1, int x2) {
      std::fill(image.at(x1, y), image.at(x2, y), uint8_t(255));
    });
  }
  fs::create_directories(root / "images" / split);
  data::write_image((root / "images" / split / (stem + ".png")).string(), image);
  write_text(root / "labels" / split / (stem + ".txt"), text);
}

// A dataset of `count` train images with 1-2 white right triangles each, labelled as polygons,
// and one val image.
inline std::string make_polygon_dataset(const fs::path& root, int count, int nc = 2) {
  const auto triangle = [](int class_id, float x, float y, float w, float h) {
    return PolygonObject{class_id, {{x, y}, {x + w, y}, {x, y + h}}};
  };
  for (int i = 0; i < count; ++i) {
    std::vector<PolygonObject> objects = {
        triangle(i % nc, 0.1f, 0.1f + 0.05f * (i % 3), 0.3f, 0.4f)};
    if (i % 2) objects.push_back(triangle((i + 1) % nc, 0.55f, 0.5f, 0.35f, 0.3f));
    add_polygon_image(root, "train", "p" + std::to_string(i), 160 + 16 * (i % 4), 128, objects);
  }
  add_polygon_image(root, "val", "v0", 128, 128, {triangle(0, 0.2f, 0.2f, 0.5f, 0.5f)});
  return write_yaml(root, nc);
}

}  // namespace bareyolo::testing
