// tests/unit/torch_pickle.cpp — the checkpoint reader on records written here byte by byte (the
// checkpoints PyTorch YOLOv5 wrote: torch_checkpoint.cpp): a tensor cut from its storage at an
// offset with strides, a view that ends on its storage's last element or one past it, a global
// under torch. that no checkpoint names, and records in two folders.
#include <cstring>

#include "engine/torch_pickle.h"
#include "tests/support/stored_zip.h"
#include "tests/support/testing.h"

using namespace bareyolo;
using namespace bareyolo::testing;

namespace {

// Pickle protocol 2's opcodes for what a checkpoint holds, each as text to concatenate.
std::string global(const std::string& module, const std::string& name) {
  return "c" + module + "\n" + name + "\n";  // GLOBAL
}
std::string text(const std::string& s) {  // BINUNICODE: 4-byte little-endian length
  std::string out = "X";
  for (int i = 0; i < 4; ++i) out += char((s.size() >> (8 * i)) & 0xff);
  return out + s;
}
std::string small(int value) { return "K" + std::string(1, char(value)); }  // BININT1
std::string tuple_of(const std::vector<int>& values) {                      // MARK ... TUPLE
  std::string out = "(";
  for (int v : values) out += small(v);
  return out + "t";
}

// torch._utils._rebuild_tensor_v2(storage, offset, size, stride, False, OrderedDict()) of the
// float storage data/0 holding `numel` elements.
std::string float_tensor(int numel, int offset, const std::vector<int>& size,
                         const std::vector<int>& stride) {
  const std::string storage = "(" + text("storage") + global("torch", "FloatStorage") + text("0") +
                              text("cpu") + small(numel) + "tQ";  // BINPERSID
  return global("torch._utils", "_rebuild_tensor_v2") + "(" + storage + small(offset) +
         tuple_of(size) + tuple_of(stride) + "\x89" + global("collections", "OrderedDict") + ")R" +
         "tR";  // NEWFALSE, the call of OrderedDict(), the argument tuple, the call
}

// A checkpoint whose data.pkl is `pickle` (protocol 2, one value) and whose storage data/0
// holds the floats 0, 1, ..., 11.
std::vector<uint8_t> checkpoint(const std::string& pickle) {
  std::string storage(12 * sizeof(float), '\0');
  for (int i = 0; i < 12; ++i) {
    const float value = float(i);
    std::memcpy(storage.data() + i * sizeof(float), &value, sizeof(float));
  }
  return stored_zip({{"archive/data.pkl", "\x80\x02" + pickle + "."}, {"archive/data/0", storage}});
}

std::vector<float> floats_of(const TensorRecord& tensor) {
  std::vector<float> values(tensor.bytes.size() / sizeof(float));
  std::memcpy(values.data(), tensor.bytes.data(), tensor.bytes.size());
  return values;
}

}  // namespace

TEST_CASE("torch pickle: a view is cut from its storage at its offset, along its strides") {
  // Offset 1, 2 rows 4 apart, 3 columns 2 apart; and a transposed 3 x 2 view from 0.
  const TorchZip zip = TorchZip::parse(checkpoint("(" + float_tensor(12, 1, {2, 3}, {4, 2}) +
                                                  float_tensor(12, 0, {3, 2}, {1, 3}) + "t"),
                                       "views.pt");
  const TorchPickle pickle = TorchPickle::read(zip);
  REQUIRE(pickle.root().kind == PickleValue::Kind::tuple);
  REQUIRE(pickle.root().items.size() == 2);
  const TensorRecord& strided = pickle.root().items[0]->tensor;
  CHECK(strided.shape == std::vector<int64_t>{2, 3});
  CHECK(floats_of(strided) == std::vector<float>{1, 3, 5, 5, 7, 9});
  const TensorRecord& transposed = pickle.root().items[1]->tensor;
  CHECK(transposed.shape == std::vector<int64_t>{3, 2});
  CHECK(floats_of(transposed) == std::vector<float>{0, 3, 1, 4, 2, 5});
}

TEST_CASE("torch pickle: a view may end on its storage's last element, not one past it") {
  // Offset 3: the last element is 3 + 4 + 2 * 2 = 11 of 12; offset 4 reaches element 12.
  const TorchPickle last = TorchPickle::read(
      TorchZip::parse(checkpoint(float_tensor(12, 3, {2, 3}, {4, 2})), "last.pt"));
  CHECK(floats_of(last.root().tensor) == std::vector<float>{3, 5, 7, 7, 9, 11});
  CHECK_THROWS_WITH_AS(
      TorchPickle::read(
          TorchZip::parse(checkpoint(float_tensor(12, 4, {2, 3}, {4, 2})), "past.pt")),
      doctest::Contains("a tensor reaching outside its storage data/0 of 12 elements"),
      std::invalid_argument);
}

TEST_CASE("torch pickle: torch's own functions are refused by name, like any global off the list") {
  for (const auto& [module, name] : std::vector<std::pair<std::string, std::string>>{
           {"torch", "load"}, {"torch.hub", "load"}, {"torch.serialization", "load"}}) {
    const std::string full = module + "." + name;
    INFO(full);
    CHECK_THROWS_WITH_AS(
        TorchPickle::read(TorchZip::parse(checkpoint(global(module, name)), "torch_global.pt")),
        doctest::Contains(("refused global '" + full + "'").c_str()), std::invalid_argument);
  }
}

TEST_CASE("torch zip: records outside the folder of the others are refused") {
  std::vector<uint8_t> two_folders =
      stored_zip({{"archive/data.pkl", "\x80\x02N."}, {"other/data/0", "x"}});
  CHECK_THROWS_WITH_AS(
      TorchZip::parse(two_folders, "folders.pt"),
      doctest::Contains("zip entry 'other/data/0' is outside the folder 'archive' of the others"),
      std::invalid_argument);
  const TorchZip one = TorchZip::parse(
      stored_zip({{"archive/data.pkl", "\x80\x02N."}, {"archive/data/0", "x"}}), "one.pt");
  CHECK(one.folder() == "archive");
  CHECK(TorchPickle::read(one).root().is_none());
}
