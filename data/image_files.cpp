// data/image_files.cpp — image discovery and the images/ -> labels/ rule (see image_files.h).
#include "data/image_files.h"

#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>
#include <sstream>
#include <stdexcept>
#include <utility>

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

// Adds the images under `root`, following symbolic links. A folder reached a second time (a
// link back up the tree, or two links to one folder) is searched once, with a note; a folder
// that cannot be listed is named with the reason. Every entry with an image extension that is
// not a folder is listed, whatever it points at (nothing, a loop, a FIFO): verification then
// reports it as an unreadable image instead of it vanishing from the count.
void add_folder_images(const fs::path& root, std::vector<std::string>& images,
                       std::vector<Problem>& problems) {
  std::set<std::pair<dev_t, ino_t>> searched;
  std::vector<fs::path> pending = {root};
  while (!pending.empty()) {
    const fs::path folder = pending.back();
    pending.pop_back();
    struct stat info {};
    if (::stat(folder.c_str(), &info) != 0) {
      problems.push_back({folder.string(), 0,
                          "cannot search this folder: " + std::string(std::strerror(errno)),
                          false});
      continue;
    }
    if (!searched.insert({info.st_dev, info.st_ino}).second) {
      problems.push_back({folder.string(), 0,
                          "leads to a folder already searched (a symbolic link loop, or a "
                          "second link to one folder): searched once",
                          false});
      continue;
    }
    std::error_code error;
    for (fs::directory_iterator entry(folder, error), end; !error && entry != end;
         entry.increment(error)) {
      std::error_code not_a_folder;  // a dangling link or a loop: not a folder, listed below
      if (entry->is_directory(not_a_folder))
        pending.push_back(entry->path());
      else if (has_image_extension(entry->path().string()))
        images.push_back(entry->path().lexically_normal().string());
    }
    if (error)
      problems.push_back({folder.string(), 0,
                          "cannot list this folder (" + error.message() +
                              "): its images are not used; check its permissions",
                          false});
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

std::vector<std::string> list_image_files(const std::vector<std::string>& sources,
                                          std::vector<Problem>* listing_problems) {
  std::vector<std::string> images;
  std::vector<Problem> problems;
  for (const std::string& source : sources) {
    fs::path path = source;
    std::error_code error;  // a link loop or a dead link is reported as not existing
    if (fs::is_directory(path, error)) {
      add_folder_images(path, images, problems);
    } else if (fs::is_regular_file(path, error) && path.extension() == ".txt") {
      add_listed_images(path, images);
    } else if (fs::is_regular_file(path, error) && has_image_extension(source)) {
      images.push_back(path.lexically_normal().string());
    } else {
      throw std::runtime_error("image source " + source +
                               " does not exist (expected a folder, a .txt list of images or "
                               "an image file)");
    }
  }
  std::sort(images.begin(), images.end());
  images.erase(std::unique(images.begin(), images.end()), images.end());
  if (listing_problems) *listing_problems = std::move(problems);
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
