// data/batch.cpp — collating samples into a batch, and the batch as the model's input (see
// batch.h).
#include "data/batch.h"

#include <cstring>
#include <stdexcept>
#include <string>

#include "data/stage_clock.h"
#include "kernels/device_memory.h"
#include "kernels/ops.h"

namespace bareyolo::data {

std::vector<LabelRow> Batch::labels() const {
  std::vector<LabelRow> rows;
  rows.reserve(size_t(num_targets()));
  for (int64_t r = 0; r < num_targets(); ++r) rows.push_back(label(r));
  return rows;
}

Tensor Batch::images_tensor(Device device) const {
  Tensor bytes = Tensor::empty({size, height, width, 3}, device, DType::u8);
  read_by_device(images, upload_async(bytes.view<uint8_t>().data, device, images.get(),
                                      image_bytes() * size_t(size)));
  return input_from_bytes(bytes);
}

Tensor Batch::input_from_bytes(const Tensor& bytes) const {
  const Device device = bytes.device();
  Tensor pixels = Tensor::empty({size, 3, height, width}, device);
  ops::hwc_bytes_to_unit_float(bytes.view<uint8_t>(), pixels.view<float>());
  if (input_height == height && input_width == width) return pixels;
  Tensor resized = Tensor::empty({size, 3, input_height, input_width}, device);
  ops::resize_bilinear(pixels.view<float>(), resized.view<float>());
  return resized;
}

Batch collate(const Step& step, std::vector<Sample>& samples) {
  const StageTimer timer(Stage::batch);
  Batch batch;
  batch.step = step.step;
  batch.size = int(samples.size());
  batch.width = step.width, batch.height = step.height;
  batch.input_width = step.input_width > 0 ? step.input_width : step.width;
  batch.input_height = step.input_height > 0 ? step.input_height : step.height;
  batch.images = allocate_host_buffer(samples.size() * batch.image_bytes());
  for (size_t i = 0; i < samples.size(); ++i) {
    Sample& sample = samples[i];
    if (sample.image.width != step.width || sample.image.height != step.height)
      throw std::logic_error("sample " + sample.meta.path + " is " +
                             std::to_string(sample.image.width) + "x" +
                             std::to_string(sample.image.height) + ", the batch " +
                             std::to_string(step.width) + "x" + std::to_string(step.height));
    std::memcpy(batch.images.get() + i * batch.image_bytes(), sample.image.pixels.data(),
                batch.image_bytes());
    for (const LabelBox& box : sample.labels)
      batch.targets.insert(batch.targets.end(),
                           {float(i), float(box.class_id), box.cx, box.cy, box.w, box.h});
    batch.meta.push_back(std::move(sample.meta));
  }
  return batch;
}

}  // namespace bareyolo::data
