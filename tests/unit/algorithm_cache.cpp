// tests/unit/algorithm_cache.cpp — the process's table of cuDNN convolution choices
// (kernels/convolution_choices.h) and the per-user cache file that keeps it
// (engine/algorithm_cache.h): every field of a key and a choice survives the file, a damaged
// file or another GPU's is refused with the reason, a save merges with what the file holds, and
// the file's place and name follow the environment and the identity. No GPU is needed: the
// table and the file are plain C++ (a GPU's convolutions fill the table; these tests do it by
// hand).
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "engine/algorithm_cache.h"
#include "tests/support/testing.h"

using namespace bareyolo;
using ops::ConvolutionChoice;
using ops::ConvolutionChoices;
using ops::ConvolutionKey;
namespace fs = std::filesystem;

namespace {

constexpr const char* kIdentity = "NVIDIA H200, sm_90, cuDNN 9.10.2";

// `count` choices with every field drawn at random (each pass, operand type and layout among
// them), as a GPU's first steps would make.
ConvolutionChoices random_choices(int count, uint32_t seed) {
  std::mt19937 random(seed);
  auto draw = [&](int64_t low, int64_t high) {
    return std::uniform_int_distribution<int64_t>(low, high)(random);
  };
  ConvolutionChoices choices;
  while (int(choices.size()) < count) {
    const ConvolutionKey key{.pass = ops::ConvolutionPass(draw(0, 2)),
                             .images = draw(1, 64),
                             .in_channels = draw(1, 1024),
                             .height = draw(1, 640),
                             .width = draw(1, 640),
                             .x_batch_stride = draw(1, 1 << 24),
                             .y_batch_stride = draw(1, 1 << 24),
                             .out_channels = draw(1, 1024),
                             .kernel_h = draw(1, 7),
                             .kernel_w = draw(1, 7),
                             .stride_h = draw(1, 2),
                             .stride_w = draw(1, 2),
                             .pad_h = draw(0, 3),
                             .pad_w = draw(0, 3),
                             .alignment = int64_t(1) << draw(1, 8),
                             .operands = ops::ConvolutionOperands(draw(0, 2)),
                             .channels_last = draw(0, 1) == 1,
                             .deterministic = draw(0, 1) == 1};
    choices[key] = {.algorithm = int(draw(0, 7)),
                    .math = int(draw(0, 2)),
                    .workspace = draw(0, int64_t(1) << 30),
                    .milliseconds = double(draw(0, 100000)) / 1024.0};  // exact in binary
  }
  return choices;
}

// A folder of its own, removed at the end.
struct Folder {
  fs::path path = fs::temp_directory_path() / ("bareyolo-algorithms-" + std::to_string(::getpid()));
  Folder() { fs::create_directories(path); }
  ~Folder() { fs::remove_all(path); }
};

// An environment variable set (or unset, with nullptr) for the scope, then put back.
struct ScopedVariable {
  std::string name;
  std::optional<std::string> before;
  ScopedVariable(const char* variable, const char* value) : name(variable) {
    if (const char* old = std::getenv(variable)) before = old;
    value ? ::setenv(variable, value, 1) : ::unsetenv(variable);
  }
  ~ScopedVariable() {
    before ? ::setenv(name.c_str(), before->c_str(), 1) : ::unsetenv(name.c_str());
  }
};

std::string refusal(const std::string& text) {
  try {
    parse_convolution_choices(text, "cache.json");
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("algorithm cache: every field of every choice survives the file's text") {
  const ConvolutionChoices choices = random_choices(40, 7);
  const std::string text = convolution_choices_json(kIdentity, choices);
  const CachedChoices read = parse_convolution_choices(text, "cache.json");
  CHECK(read.identity == kIdentity);
  CHECK(read.choices.size() == choices.size());
  CHECK(read.choices == choices);
  CHECK(convolution_choices_json(kIdentity, read.choices) == text);
  CHECK(parse_convolution_choices(convolution_choices_json(kIdentity, {}), "x").choices.empty());
}

TEST_CASE("algorithm cache: a damaged file is refused, naming the choice and the field") {
  const std::string good = convolution_choices_json(kIdentity, random_choices(3, 11));
  CHECK(refusal(good).empty());
  CHECK(refusal("{not json").find("cache.json is not a JSON object") != std::string::npos);
  auto replaced = [&](const std::string& from, const std::string& to) {
    std::string text = good;
    const size_t at = text.find(from);
    REQUIRE(at != std::string::npos);
    return text.replace(at, from.size(), to);
  };
  CHECK(refusal(replaced("\"version\": 1", "\"version\": 2")).find("version 1") !=
        std::string::npos);
  CHECK(refusal(replaced("bareyolo convolution algorithms", "something else"))
            .find("not a file of") != std::string::npos);
  // The second choice's fields, one at a time.
  const size_t second = good.find("\"pass\"", good.find("\"pass\"") + 1);
  auto in_second = [&](const std::string& from, const std::string& to) {
    std::string text = good;
    const size_t at = text.find(from, second);
    REQUIRE(at != std::string::npos);
    return refusal(text.replace(at, from.size(), to));
  };
  const std::string missing = in_second("\"algorithm\"", "\"algorithms\"");
  CHECK(missing.find("choice 1 of cache.json has no \"algorithm\"") != std::string::npos);
  const std::string negative = in_second("\"pad\":[", "\"pad\":[-1");
  CHECK(negative.find("choice 1 of cache.json pad") != std::string::npos);
  std::string zero_stride = good;  // strides are 1 or 2 here: one digit
  zero_stride[zero_stride.find("\"stride\":[", second) + 10] = '0';
  CHECK(refusal(zero_stride).find("choice 1 of cache.json stride") != std::string::npos);
  CHECK(in_second("\"milliseconds\":", "\"milliseconds\":-").find("not a number >= 0") !=
        std::string::npos);
  CHECK(in_second("\"layout\":\"n", "\"layout\":\"x").find("not nchw or nhwc") !=
        std::string::npos);
  const size_t pass = good.find("\"pass\":\"", second) + 8;
  std::string sideways = good;
  sideways.insert(pass, "sideways-");
  CHECK(refusal(sideways).find("not one of forward, backward-data, backward-weight") !=
        std::string::npos);
}

TEST_CASE("algorithm cache: a save merges with the file, and another GPU's file is not read") {
  Folder folder;
  const fs::path path = folder.path / "deeper" / "cache.json";
  std::string why_not;
  CHECK_FALSE(read_algorithm_cache(path, kIdentity, why_not));  // no file: nothing, no reason
  CHECK(why_not.empty());

  const ConvolutionChoices first = random_choices(5, 1);
  CHECK(write_algorithm_cache(path, kIdentity, first) == 5);
  CHECK(read_algorithm_cache(path, kIdentity, why_not) == first);

  // Another run's choices: one new key, one key of the first with another algorithm.
  ConvolutionChoices second = random_choices(1, 2);
  ConvolutionChoice changed = first.begin()->second;
  changed.algorithm = (changed.algorithm + 1) % 8;
  second[first.begin()->first] = changed;
  CHECK(write_algorithm_cache(path, kIdentity, second) == 6);
  const std::optional<ConvolutionChoices> merged = read_algorithm_cache(path, kIdentity, why_not);
  REQUIRE(merged);
  for (const auto& [key, choice] : first)
    CHECK(merged->at(key) == (key == first.begin()->first ? changed : choice));
  CHECK(merged->at(std::prev(second.end())->first) == std::prev(second.end())->second);
  for (const auto& entry : fs::directory_iterator(path.parent_path()))  // no temporary left
    CHECK(entry.path().filename() == "cache.json");

  CHECK_FALSE(read_algorithm_cache(path, "NVIDIA A100, sm_80, cuDNN 9.10.2", why_not));
  CHECK(why_not.find("was made on NVIDIA H200, sm_90, cuDNN 9.10.2, not on this NVIDIA A100") !=
        std::string::npos);

  std::ofstream(path) << "{\"format\": \"bareyolo convolution algorithms\", \"version\": 1";
  CHECK_FALSE(read_algorithm_cache(path, kIdentity, why_not));
  CHECK(why_not.find("is not a JSON object") != std::string::npos);
  CHECK(write_algorithm_cache(path, kIdentity, first) == 5);  // a damaged file is replaced
  CHECK(read_algorithm_cache(path, kIdentity, why_not) == first);
}

TEST_CASE("algorithm cache: a provisional choice travels in the text but is never saved") {
  Folder folder;
  const fs::path path = folder.path / "cache.json";
  const ConvolutionChoices settled = random_choices(4, 5);
  REQUIRE(write_algorithm_cache(path, kIdentity, settled) == 4);
  // This run chose key a again short of memory, and met key b only short of memory.
  const ConvolutionKey a = settled.begin()->first, b = random_choices(1, 6).begin()->first;
  REQUIRE_FALSE(settled.count(b));
  ConvolutionChoices run = settled;
  run[a].algorithm = (run[a].algorithm + 1) % 8;
  run[a].provisional = true;
  run[b] = {.algorithm = 3, .math = 1, .workspace = 0, .milliseconds = 0, .provisional = true};
  // The text (a broadcast's) carries the flag where it is true, and only there.
  const std::string text = convolution_choices_json(kIdentity, run);
  size_t flags = 0;
  for (size_t at = text.find("\"provisional\":true"); at != std::string::npos;
       at = text.find("\"provisional\":true", at + 1))
    ++flags;
  CHECK(flags == 2);
  CHECK(text.find("\"provisional\":false") == std::string::npos);
  CHECK(parse_convolution_choices(text, "rank 0").choices == run);
  std::string wrong = text;
  wrong.replace(wrong.find("\"provisional\":true"), 18, "\"provisional\":1");
  CHECK(refusal(wrong).find("\"provisional\" is not true or false") != std::string::npos);
  // The file keeps what it held for a and never gets b.
  CHECK(write_algorithm_cache(path, kIdentity, run) == 4);
  std::string why_not;
  CHECK(read_algorithm_cache(path, kIdentity, why_not) == settled);
}

TEST_CASE("algorithm cache: its folder from the environment, its name from the identity") {
  const ScopedVariable own("BAREYOLO_CACHE_DIR", "/tmp/own"), xdg("XDG_CACHE_HOME", "/tmp/xdg"),
      home("HOME", "/tmp/home");
  const std::string name = "convolution-algorithms-NVIDIA-H200-sm_90-cuDNN-9.10.2.json";
  CHECK(algorithm_cache_path(kIdentity) == fs::path("/tmp/own") / name);
  ::unsetenv("BAREYOLO_CACHE_DIR");
  CHECK(algorithm_cache_path(kIdentity) == fs::path("/tmp/xdg/bareyolo") / name);
  ::setenv("XDG_CACHE_HOME", "", 1);
  CHECK(algorithm_cache_path(kIdentity) == fs::path("/tmp/home/.cache/bareyolo") / name);
  // Another GPU or cuDNN, another file.
  CHECK(algorithm_cache_path("NVIDIA H200, sm_90, cuDNN 9.11.0") !=
        algorithm_cache_path(kIdentity));
}

TEST_CASE("convolution choices: adoption adds and replaces, changes are marked") {
  ops::forget_convolution_choices();
  const Device device = Device::cpu();  // the table is plain C++: any device's will do
  CHECK(ops::convolution_choices_identity(device).empty());
  CHECK(load_algorithm_cache(device).empty());  // the CPU has no cuDNN: no file, no message
  const ConvolutionChoices drawn = random_choices(2, 3);
  const ConvolutionKey a = drawn.begin()->first, b = std::next(drawn.begin())->first;
  const ConvolutionChoice one{.algorithm = 1, .math = 1}, two{.algorithm = 2, .math = 0};
  CHECK_FALSE(ops::convolution_choices_changed_since_saved(device));
  ops::adopt_convolution_choices(device, {{a, one}});
  CHECK(ops::find_convolution_choice(device, a) == one);
  CHECK_FALSE(ops::find_convolution_choice(device, b));
  CHECK(ops::convolution_choices_changed_since_saved(device));
  ops::mark_convolution_choices_saved(device);
  ops::adopt_convolution_choices(device, {{a, one}});  // the same again: no change
  CHECK_FALSE(ops::convolution_choices_changed_since_saved(device));
  ops::adopt_convolution_choices(device, {{a, two}, {b, one}});
  CHECK(ops::find_convolution_choice(device, a) == two);
  CHECK(ops::find_convolution_choice(device, b) == one);
  CHECK(ops::convolution_choices_changed_since_saved(device));
  CHECK(ops::convolution_choices(device).size() == 2);
  CHECK(ops::convolution_choices(Device::cuda(0)).empty());  // each device its own table
  CHECK(save_algorithm_cache(device).empty());               // nothing written for the CPU
  ops::forget_convolution_choices();
}
