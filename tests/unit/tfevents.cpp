// tests/unit/tfevents.cpp — TensorBoard's event files (engine/tfevents.h) against values
// worked out independently: CRC-32C's published check values (RFC 3720 B.4 and the
// "123456789" check), the masking formula, TFRecord's framing, and the protobuf bytes of an
// Event spelled out field by field. tests/shell/tensorboard_events.sh reads a run's file with
// TensorBoard's own reader.
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "engine/tfevents.h"
#include "models/train/outputs/tensorboard.h"

using namespace bareyolo;

namespace {

uint32_t little_endian_u32(const std::string& bytes, size_t at) {
  uint32_t value = 0;
  for (int i = 3; i >= 0; --i) value = value << 8 | uint8_t(bytes[at + size_t(i)]);
  return value;
}

std::string bytes(std::initializer_list<int> values) {
  std::string out;
  for (int v : values) out += char(v);
  return out;
}

}  // namespace

TEST_CASE("tfevents: crc32c matches its published check values and is masked as TFRecord's") {
  CHECK(crc32c("") == 0);
  CHECK(crc32c("123456789") == 0xE3069283u);
  CHECK(crc32c(std::string(32, '\0')) == 0x8A9136AAu);
  CHECK(crc32c(std::string(32, '\xff')) == 0x62A8AB43u);
  std::string ascending;
  for (int i = 0; i < 32; ++i) ascending += char(i);
  CHECK(crc32c(ascending) == 0x46DD794Eu);
  CHECK(masked_crc32c("123456789") == 0xC78AB0E5u);  // rotate right 15, add 0xa282ead8
}

TEST_CASE("tfevents: a record is length, its masked crc, the data, the data's masked crc") {
  const std::string record = tfrecord("hello");
  REQUIRE(record.size() == 8 + 4 + 5 + 4);
  CHECK(record.substr(0, 8) == bytes({5, 0, 0, 0, 0, 0, 0, 0}));
  CHECK(little_endian_u32(record, 8) == masked_crc32c(record.substr(0, 8)));
  CHECK(record.substr(12, 5) == "hello");
  CHECK(little_endian_u32(record, 17) == masked_crc32c("hello"));
}

TEST_CASE("tfevents: events are the protobuf bytes of wall_time, step and their payload") {
  const std::string one = bytes({0, 0, 0, 0, 0, 0, 0xF0, 0x3F});  // 1.0 as a little-endian double
  CHECK(file_version_event(1.0) ==
        bytes({0x09}) + one + bytes({0x10, 0x00, 0x1A, 13}) + "brain.Event:2");
  // Value {tag "a", simple_value 0.5f} inside Summary inside Event field 5; step 300 is the
  // two-byte varint AC 02.
  const std::string value = bytes({0x0A, 1, 'a', 0x15, 0, 0, 0, 0x3F});
  CHECK(scalars_event(1.0, 300, {{"a", 0.5f}}) ==
        bytes({0x09}) + one + bytes({0x10, 0xAC, 0x02, 0x2A, 10, 0x0A, 8}) + value);
  // A varint's 7-bit groups: 127 fits one byte, 128 needs two (80 01).
  CHECK(scalars_event(1.0, 127, {}).substr(9, 2) == bytes({0x10, 0x7F}));
  CHECK(scalars_event(1.0, 128, {}).substr(9, 3) == bytes({0x10, 0x80, 0x01}));
}

TEST_CASE("tfevents: the run's scalars carry YOLOv5's tags, validation's only when validated") {
  models::EpochMetrics m{.epoch = 4, .map50 = 0.5, .validated = true};
  const auto scalars = models::tensorboard_scalars(m);
  CHECK(scalars.size() == 13);
  CHECK(std::count(scalars.begin(), scalars.end(),
                   std::pair<std::string, float>{"metrics/mAP_0.5", 0.5f}) == 1);
  // Each tag holds its own field: every field a different value.
  using M = models::EpochMetrics;
  const std::vector<std::pair<std::string, double M::*>> fields = {
      {"train/box_loss", &M::train_box},
      {"train/obj_loss", &M::train_obj},
      {"train/cls_loss", &M::train_cls},
      {"metrics/precision", &M::precision},
      {"metrics/recall", &M::recall},
      {"metrics/mAP_0.5", &M::map50},
      {"metrics/mAP_0.5:0.95", &M::map50_95},
      {"val/box_loss", &M::val_box},
      {"val/obj_loss", &M::val_obj},
      {"val/cls_loss", &M::val_cls},
      {"x/lr0", &M::lr0},
      {"x/lr1", &M::lr1},
      {"x/lr2", &M::lr2}};
  for (size_t k = 0; k < fields.size(); ++k) m.*fields[k].second = 0.125 * double(k + 1);
  const auto distinct = models::tensorboard_scalars(m);
  for (const auto& tag_field : fields)
    CHECK_MESSAGE(
        std::count(distinct.begin(), distinct.end(),
                   std::pair<std::string, float>{tag_field.first, float(m.*tag_field.second)}) == 1,
        tag_field.first);
  m.validated = false;
  const auto unvalidated = models::tensorboard_scalars(m);
  CHECK(unvalidated.size() == 6);
  for (const auto& [tag, value] : unvalidated)
    CHECK((tag.starts_with("train/") || tag.starts_with("x/")));

  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("bareyolo-tfevents-" + std::to_string(::getpid()));
  std::string written;
  {
    EventsFile file(path.string());
    file.add_scalars(4, {{"a", 0.5f}});
    // TensorBoard reads a run as it goes: each record is on disk once written, not at close.
    std::ifstream in(path, std::ios::binary);
    written.assign(std::istreambuf_iterator<char>(in), {});
  }
  std::filesystem::remove(path);
  // Two records; the second's data is a scalars event of step 4 (its wall time is now).
  const std::string first = tfrecord(file_version_event(0)).substr(0, 8);
  CHECK(written.substr(0, 8) == first);
  const size_t second = 8 + 4 + size_t(uint8_t(first[0])) + 4;
  REQUIRE(written.size() > second + 12);
  const std::string data = written.substr(second + 12, written.size() - second - 16);
  CHECK(little_endian_u32(written, written.size() - 4) == masked_crc32c(data));
  CHECK(data.substr(9) == scalars_event(0, 4, {{"a", 0.5f}}).substr(9));  // after wall_time
}
