// tests/unit/data_labels.cpp — label problems that used to pass unnoticed: a zero-size box and
// a UTF-8 byte-order mark.
#include "data/label_file.h"
#include "tests/support/data_fixtures.h"

using namespace bareyolo;
using namespace bareyolo::testing;

TEST_CASE("label lines: a zero-size box is refused like the other bad labels") {
  // Before: counted as a normal label.
  const data::LabelFile parsed = data::parse_labels(
      "0 0.5 0.5 0 0.2\n0 0.5 0.5 0.2 0.0\n0 0.5 0.5 0.2 -0.0004\n"
      "0 0.5 0.5 0.2 0.2\n",
      "z.txt", 1);
  CHECK_FALSE(parsed.usable());
  REQUIRE(parsed.problems.size() == 3);
  CHECK(parsed.problems[0].to_string() ==
        "z.txt:1: w = 0 makes a zero-size box: a box's width and height must be > 0 (image "
        "skipped)");
  CHECK(parsed.problems[1].message.starts_with("h = 0.0 makes a zero-size box"));
  CHECK(parsed.problems[2].message.starts_with("h = -0.0004 makes a zero-size box"));  // clamped
  CHECK(parsed.boxes.size() == 1);
}

TEST_CASE("label files: a UTF-8 byte-order mark is stripped with one note naming the file") {
  // Before: "class '\xEF\xBB\xBF0' is not a number" (the mark invisible), image skipped.
  const data::LabelFile parsed = data::parse_labels(
      "\xEF\xBB\xBF"
      "0 0.5 0.5 0.2 0.2\n1 0.3 0.3 0.1 0.1\n",
      "bom.txt", 2);
  CHECK(parsed.usable());
  REQUIRE(parsed.boxes.size() == 2);
  CHECK(parsed.boxes[0].class_id == 0);
  REQUIRE(parsed.problems.size() == 1);  // once per file, not per line
  CHECK(parsed.problems[0].to_string() ==
        "bom.txt: starts with a UTF-8 byte-order mark, ignored (saving it without one silences "
        "this)");
  CHECK(data::parse_labels("0 0.5 0.5 0.2 0.2\n", "plain.txt", 1).problems.empty());
}
