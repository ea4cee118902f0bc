// data/image_files.cpp — image discovery and the images/ -> labels/ rule (see image_files.h).
#include "data/image_files.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <filesystem>
#include <sstream>
#include <stdexcept>

#include "data/regular_file.h"

namespace fs = std::filesystem;

namespace bareyolo::data {

namespace {

constexpr std::array<const char*, 10> kImageExtensions = {"bmp", "dng", "jpeg", "jpg",  "mpo",
                                                          "png", "tif", "tiff", "webp", "pfm"};

void add_listed_images(const fs::path& list_file, std::vector<std::string>& images) {
  const FileContents contents = read_regular_file(list_file.string());
  if (contents.kind != FileContents::regular)
    throw std::runtime_error("cannot read image list " + list_file.string() + ": " +
                             contents.error);
  std::istringstream in(contents.bytes);
  fs::path folder = list_file.parent_path();
  std::string line;
  while (std::getline(in, line)) {
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
    if (line.empty()) continue;
    fs::path path = line;
    if (path.is_relative()) path = folder / path;
    if (has_image_extension(path.string())) images.push_back(path.lexically_normal().string());
  }
}

}  // namespace

bool has_image_extension(const std::string& path) {
  std::string ext = fs::path(path).extension().string();
  if (ext.empty()) return false;
  ext.erase(0, 1);
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return std::find(kImageExtensions.begin(), kImageExtensions.end(), ext) != kImageExtensions.end();
}

std::vector<std::string> list_image_files(const std::vector<std::string>& sources) {
  std::vector<std::string> images;
  for (const std::string& source : sources) {
    fs::path path = source;
    if (fs::is_directory(path)) {
      for (const auto& entry :
           fs::recursive_directory_iterator(path, fs::directory_options::follow_directory_symlink))
        if (entry.is_regular_file() && has_image_extension(entry.path().string()))
          images.push_back(entry.path().lexically_normal().string());
    } else if (fs::is_regular_file(path) && path.extension() == ".txt") {
      add_listed_images(path, images);
    } else if (fs::is_regular_file(path) && has_image_extension(source)) {
      images.push_back(path.lexically_normal().string());
    } else {
      throw std::runtime_error("image source " + source +
                               " does not exist (expected a folder, a .txt list of images or "
                               "an image file)");
    }
  }
  std::sort(images.begin(), images.end());
  images.erase(std::unique(images.begin(), images.end()), images.end());
  return images;
}

std::string label_path_for(const std::string& image_path) {
  std::string path = image_path;
  const std::string images_dir = "/images/";
  size_t at = path.rfind(images_dir);
  if (at != std::string::npos) path.replace(at, images_dir.size(), "/labels/");
  size_t dot = path.find_last_of('.');
  size_t slash = path.find_last_of('/');
  if (dot != std::string::npos && (slash == std::string::npos || dot > slash)) path.erase(dot);
  return path + ".txt";
}

}  // namespace bareyolo::data
