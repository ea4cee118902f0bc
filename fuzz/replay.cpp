// fuzz/replay.cpp — the driver the fuzz targets link in the normal build instead of libFuzzer:
// replays every file of the folders (or files) named on its command line through the target,
// once, so that the seed corpus and every crash found (fuzz/regressions/) stay tested.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace fs = std::filesystem;

int main(int argc, char** argv) {
  std::vector<fs::path> inputs;
  for (int i = 1; i < argc; ++i) {
    if (fs::is_directory(argv[i])) {
      for (const auto& entry : fs::recursive_directory_iterator(argv[i]))
        if (entry.is_regular_file()) inputs.push_back(entry.path());
    } else if (fs::is_regular_file(argv[i])) {
      inputs.push_back(argv[i]);
    }  // a folder that does not exist (no regressions yet) holds no inputs
  }
  if (inputs.empty()) {
    std::fprintf(stderr, "replay: no inputs in the folders given: name a seed corpus\n");
    return 1;
  }
  std::sort(inputs.begin(), inputs.end());
  for (const fs::path& input : inputs) {
    std::ifstream in(input, std::ios::binary);
    const std::vector<char> bytes{std::istreambuf_iterator<char>(in), {}};
    std::fprintf(stderr, "replay: %s (%zu bytes)\n", input.c_str(), bytes.size());
    static const char kNothing = 0;  // libFuzzer never passes a null pointer, even for no bytes
    LLVMFuzzerTestOneInput(
        reinterpret_cast<const uint8_t*>(bytes.empty() ? &kNothing : bytes.data()), bytes.size());
  }
  std::printf("replayed %zu inputs\n", inputs.size());
  return 0;
}
