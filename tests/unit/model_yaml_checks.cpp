// tests/unit/model_yaml_checks.cpp — model yamls whose numbers cannot be right are refused
// with the file, the row or level, the value and the rule (issue 52): zero, negative or NaN
// anchors (once accepted, and divided by in the loss), a stride of 0 (once "Conv2d: channels,
// kernel and stride must be positive" without the stride), an nc whose Detect width overflows
// an int (once "c_out=-2147483636"), and a width_multiple too large for memory (once "try a
// smaller --batch", which init does not have).
#include <new>

#include "engine/shipped_files.h"
#include "kernels/cpu/host_memory.h"
#include "models/yolo/yolo_model.h"
#include "tests/support/sanitizers.h"
#include "tests/support/testing.h"

using namespace bareyolo;
using namespace bareyolo::models;

namespace {
// A one-level model yaml: `multiples` (depth_multiple and width_multiple lines), `anchors` for
// its one level, and its rows.
std::string model_yaml(const std::string& anchors, const std::string& rows,
                       const std::string& multiples = "depth_multiple: 1\nwidth_multiple: 1\n") {
  return "nc: 2\n" + multiples + "anchors:\n  - [" + anchors + "]\nbackbone:\n" + rows +
         "head:\n  - [[-1], 1, Detect, [nc, anchors]]\n";
}
const std::string kOneConv = "  - [-1, 1, Conv, [8, 3, 2]]\n";

// AddressSanitizer's operator new aborts the process when it cannot allocate, whatever
// allocator_may_return_null says (that covers malloc only): no bad_alloc to catch there.
#if BAREYOLO_TEST_ASAN
constexpr bool kOperatorNewAborts = true;
#else
constexpr bool kOperatorNewAborts = false;
#endif
}  // namespace

TEST_CASE("zero, negative and NaN anchors are refused naming the yaml, level and value") {
  CHECK_NOTHROW(parse_model_config(model_yaml("10,13, 16,30", kOneConv), "ok.yaml"));
  CHECK_THROWS_WITH_AS(parse_model_config(model_yaml("10,13, 0,30", kOneConv), "zero.yaml"),
                       doctest::Contains("zero.yaml: anchors level 0, value 2 (the width of "
                                         "anchor 1) is 0; anchors are widths and heights in "
                                         "pixels and must be positive"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(parse_model_config(model_yaml("10,-13, 16,30", kOneConv), "neg.yaml"),
                       doctest::Contains("neg.yaml: anchors level 0, value 1 (the height of "
                                         "anchor 0) is -13"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(parse_model_config(model_yaml("10,13, 16,.nan", kOneConv), "nan.yaml"),
                       doctest::Contains("nan.yaml: anchors level 0, value 3"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(parse_model_config(model_yaml("10,13, .inf,30", kOneConv), "inf.yaml"),
                       doctest::Contains("must be positive"), std::invalid_argument);
}

TEST_CASE("a conv stride or kernel below 1 is refused naming the row, the value and the rule") {
  auto build = [](const std::string& rows) {
    DetectionModel(parse_model_config(model_yaml("10,13, 16,30", rows), "s.yaml"));
  };
  CHECK_THROWS_WITH_AS(build("  - [-1, 1, Conv, [8, 3, 0]]\n"),
                       doctest::Contains("s.yaml, row 0 (line 7), Conv: the stride (argument 2) "
                                         "is 0; it must be a whole number >= 1"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(build("  - [-1, 1, Conv, [8, 3, -2]]\n"),
                       doctest::Contains("the stride (argument 2) is -2"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(build("  - [-1, 1, Conv, [8, 0, 1]]\n"),
                       doctest::Contains("the kernel size (argument 1) is 0"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(
      build(kOneConv + "  - [-1, 1, SPPF, [8, 0]]\n"),
      doctest::Contains("row 1 (line 8), SPPF: the pooling size (argument 1) is 0"),
      std::invalid_argument);
  // A whole number beyond int (fuzz/regressions/model_yaml/): refused, not cast (undefined).
  CHECK_THROWS_WITH_AS(build("  - [-1, 1, Conv, [63333333333333333334, 3, 1]]\n"),
                       doctest::Contains("Conv: argument 0 must be a whole number within "
                                         "+-2147483647"),
                       std::invalid_argument);
}

TEST_CASE("a row's number below 1 is refused naming the row and the value") {
  CHECK_THROWS_WITH_AS(
      parse_model_config(model_yaml("10,13, 16,30", "  - [-1, 0, C3, [8]]\n"), "n.yaml"),
      doctest::Contains("n.yaml, row 0 (line 7): number must be at least 1, got 0"),
      std::invalid_argument);
}

TEST_CASE("an nc beyond kMaxClasses is refused with the range, before any int overflows") {
  // A yaml's whole numbers are checked against int's range before the cast (undefined beyond).
  std::string yaml = model_yaml("10,13, 16,30", kOneConv);
  yaml.replace(0, 5, "nc: 1e10");
  CHECK_THROWS_WITH_AS(parse_model_config(yaml, "nc.yaml"),
                       doctest::Contains("nc.yaml: nc must be a whole number within +-2147483647, "
                                         "got 1e10"),
                       std::invalid_argument);
  const ModelConfig config = load_model_config(shipped_file("models/yolov5-tiny.yaml"));
  // Before: "Conv2d: channels, kernel and stride must be positive (c_in=16 c_out=-2147483636".
  for (const int nc : {2147483647, kMaxClasses + 1})
    CHECK_THROWS_WITH_AS(DetectionModel(config, {.nc = nc}),
                         doctest::Contains(("nc " + std::to_string(nc) +
                                            " is out of range: a model takes 1 to 200000 classes")
                                               .c_str()),
                         std::invalid_argument);
}

TEST_CASE("a width_multiple too large for memory says so, and names the multiples" *
          doctest::skip(kOperatorNewAborts)) {
  // Row 0 has 100000 channels (cheap); row 1's 10^9 x 10^5 weights exceed any address space.
  const std::string rows = "  - [-1, 1, Conv, [1, 1, 1]]\n  - [-1, 1, Conv, [10000, 1, 1]]\n";
  const ModelConfig wide = parse_model_config(
      model_yaml("10,13, 16,30", rows, "depth_multiple: 1\nwidth_multiple: 100000\n"), "wide.yaml");
  try {
    DetectionModel model(wide);
    FAIL("a model of 10^14 weights was built");
  } catch (const HostOutOfMemory& error) {  // still a std::bad_alloc
    const std::string what = error.what();
    CHECK(what.find("building the model of wide.yaml (width_multiple 100000, depth_multiple 1)") !=
          std::string::npos);
    CHECK(what.find("lower width_multiple or depth_multiple") != std::string::npos);
    CHECK(what.find("--batch") == std::string::npos);
  }
}

TEST_CASE("width and depth multiples whose counts overflow an int are refused at their row") {
  // A width whose channel count, or a depth whose repeat count, does not fit an int is refused
  // before anything is allocated (the cast was undefined: depth_multiple 1e12 built 1 repeat).
  const ModelConfig deeper =
      parse_model_config(model_yaml("10,13, 16,30", kOneConv + "  - [-1, 3, C3, [8]]\n",
                                    "depth_multiple: 1e12\nwidth_multiple: 1\n"),
                         "d.yaml");
  CHECK_THROWS_WITH_AS(DetectionModel{deeper},
                       doctest::Contains("d.yaml, row 1 (line 8), C3: depth_multiple 1e+12 makes "
                                         "3 repeats 3e+12, more than a model can have"),
                       std::invalid_argument);
  const ModelConfig wider = parse_model_config(
      model_yaml("10,13, 16,30", kOneConv, "depth_multiple: 1\nwidth_multiple: 1e12\n"), "w.yaml");
  CHECK_THROWS_WITH_AS(DetectionModel{wider},
                       doctest::Contains("w.yaml, row 0 (line 7), Conv: width_multiple 1e+12 "
                                         "makes 8 output channels 8e+12, more than a layer can "
                                         "have"),
                       std::invalid_argument);
}
