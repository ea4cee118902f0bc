// tests/unit/batch.cpp — a batch on the host and as the model's input (data/batch.h): collate
// copies each sample's bytes as they are, with the step's sizes and the labels' rows; on the CPU
// images_tensor is the bytes' NCHW floats (byte * (1 / 255)), computed here independently, and
// records no device read; a --multi-scale batch's is that conversion, then each plane resized
// by resize_bilinear; the trainer's ImageUploader gives images_tensor's input through its two
// reused buffers. The GPU's upload is tests/cuda/batch_upload.cpp.
#include <cstring>

#include "data/batch.h"
#include "data/image_upload.h"
#include "kernels/ops.h"
#include "tests/support/random_images.h"

using namespace bareyolo;
using namespace bareyolo::testing;

namespace {

data::Step step_of(int width, int height, int input_width = 0, int input_height = 0) {
  data::Step step;
  step.step = 3;
  step.width = width, step.height = height;
  step.input_width = input_width, step.input_height = input_height;
  return step;
}

}  // namespace

TEST_CASE("collate: the samples' bytes as they are, the step's sizes, a label row per box") {
  Rng rng(81);
  std::vector<data::Sample> samples = random_samples(rng, 3, 11, 6);
  const std::vector<data::Sample> originals = samples;  // collate moves the metadata out
  const data::Batch batch = data::collate(step_of(11, 6), samples);
  CHECK(batch.step == 3);
  REQUIRE(batch.size == 3);
  CHECK((batch.width == 11 && batch.height == 6));
  CHECK((batch.input_width == 11 && batch.input_height == 6));
  REQUIRE(batch.image_bytes() == originals[0].image.pixels.size());
  for (int i = 0; i < 3; ++i)
    CHECK(std::memcmp(batch.image(i), originals[size_t(i)].image.pixels.data(),
                      batch.image_bytes()) == 0);
  CHECK(reinterpret_cast<uintptr_t>(batch.images.get()) % 64 == 0);
  CHECK(batch.targets == std::vector<float>{0, 0, 0.5f, 0.5f, 0.25f, 0.5f,  //
                                            1, 1, 0.5f, 0.5f, 0.25f, 0.5f,  //
                                            2, 2, 0.5f, 0.5f, 0.25f, 0.5f});
  REQUIRE(batch.meta.size() == 3);
  CHECK(batch.meta[2].path == originals[2].meta.path);

  // --multi-scale: the same bytes; the input size is the step's.
  std::vector<data::Sample> again = originals;
  const data::Batch scaled = data::collate(step_of(11, 6, 16, 9), again);
  CHECK((scaled.width == 11 && scaled.height == 6));
  CHECK((scaled.input_width == 16 && scaled.input_height == 9));
  CHECK(std::memcmp(scaled.images.get(), batch.images.get(), 3 * batch.image_bytes()) == 0);
}

TEST_CASE("collate: a sample of another size than the step's is refused, naming it") {
  Rng rng(82);
  std::vector<data::Sample> samples = random_samples(rng, 2, 8, 8);
  samples[1].image = data::Image(8, 7, 0);
  CHECK_THROWS_WITH_AS(data::collate(step_of(8, 8), samples),
                       "sample random1.jpg is 8x7, the batch 8x8", std::logic_error);
}

TEST_CASE("images_tensor on the host: the bytes' NCHW floats, no device read recorded") {
  Rng rng(83);
  std::vector<data::Sample> samples = random_samples(rng, 2, 13, 5);
  const data::Batch batch = data::collate(step_of(13, 5), samples);
  const Tensor images = batch.images_tensor(Device::cpu());
  CHECK(images.shape() == Shape4{2, 3, 5, 13});
  CHECK(images.to_vector<float>() == unit_floats_nchw(batch.images.get(), 2, 5, 13));
  CHECK(batch.images.get_deleter().last_read.complete());
  CHECK_FALSE(batch.images.get_deleter().last_read.recorded());
}

TEST_CASE("images_tensor of a --multi-scale batch: converted, then every plane resized") {
  Rng rng(84);
  // Up and down, a side at a time, and both.
  const int sizes[][2] = {{19, 12}, {7, 4}, {13, 12}, {10, 5}};
  for (const auto& size : sizes) {
    CAPTURE(size[0]);
    CAPTURE(size[1]);
    std::vector<data::Sample> samples = random_samples(rng, 2, 10, 8);
    const data::Batch batch = data::collate(step_of(10, 8, size[0], size[1]), samples);
    const Tensor images = batch.images_tensor(Device::cpu());
    REQUIRE(images.shape() == Shape4{2, 3, size[1], size[0]});
    const Tensor converted =
        Tensor::from_vector(unit_floats_nchw(batch.images.get(), 2, 8, 10), {2, 3, 8, 10});
    Tensor expected = Tensor::zeros(images.shape());
    for (int64_t plane = 0; plane < 6; ++plane) {
      const int64_t n = plane / 3, c = plane % 3;
      ops::resize_bilinear(converted.images(n, n + 1).channels(c, c + 1).view<float>(),
                           expected.images(n, n + 1).channels(c, c + 1).view<float>());
    }
    CHECK(images.to_vector<float>() == expected.to_vector<float>());
  }
}

TEST_CASE("image uploader on the host: each batch's input as images_tensor's, buffers grown") {
  Rng rng(85);
  data::ImageUploader uploader(Device::cpu());
  // (size, width, height, input width, input height): the first buffer, the second, a smaller
  // batch in the first (a prefix of it), a larger one that grows the second, a --multi-scale one.
  const int shapes[][5] = {
      {3, 14, 10, 0, 0}, {2, 9, 6, 0, 0}, {1, 8, 4, 0, 0}, {4, 16, 12, 0, 0}, {2, 10, 8, 15, 6}};
  std::vector<data::Batch> batches;
  std::vector<Tensor> inputs;  // all kept: a later upload must not change an earlier input
  for (const auto& s : shapes) {
    std::vector<data::Sample> samples = random_samples(rng, s[0], s[1], s[2]);
    batches.push_back(data::collate(step_of(s[1], s[2], s[3], s[4]), samples));
    inputs.push_back(uploader.images_tensor(batches.back()));
  }
  for (size_t b = 0; b < batches.size(); ++b) {
    CAPTURE(b);
    CHECK(inputs[b].shape() == batches[b].images_tensor(Device::cpu()).shape());
    CHECK(inputs[b].to_vector<float>() ==
          batches[b].images_tensor(Device::cpu()).to_vector<float>());
    CHECK_FALSE(batches[b].images.get_deleter().last_read.recorded());
  }
}
