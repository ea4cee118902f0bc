// data/batch.cpp — collating samples into a batch (see batch.h).
#include "data/batch.h"

#include <stdexcept>
#include <string>

#include "data/plane_resize.h"
#include "kernels/device_memory.h"

namespace bareyolo::data {

Tensor Batch::images_tensor(Device device) const {
  Tensor tensor = Tensor::empty({size, 3, height, width}, device);
  const size_t bytes = image_floats() * size_t(size) * sizeof(float);
  read_by_device(images, upload_async(tensor.view<float>().data, device, images.get(), bytes));
  return tensor;
}

namespace {

// HWC bytes -> CHW floats in [0, 1].
void to_planar_float(const Image& image, float* out) {
  const size_t plane = size_t(image.width) * image.height;
  const uint8_t* p = image.pixels.data();
  constexpr float kScale = 1.0f / 255.0f;
  for (size_t i = 0; i < plane; ++i, p += 3) {
    out[i] = p[0] * kScale;
    out[plane + i] = p[1] * kScale;
    out[2 * plane + i] = p[2] * kScale;
  }
}

}  // namespace

Batch collate(const Step& step, std::vector<Sample>& samples) {
  Batch batch;
  batch.step = step.step;
  batch.size = int(samples.size());
  batch.width = step.input_width > 0 ? step.input_width : step.width;
  batch.height = step.input_height > 0 ? step.input_height : step.height;
  batch.images = allocate_host_buffer(samples.size() * batch.image_floats());
  const bool resized = batch.width != step.width || batch.height != step.height;
  std::vector<float> planes(resized ? size_t(3) * step.width * step.height : 0);
  for (size_t i = 0; i < samples.size(); ++i) {
    Sample& sample = samples[i];
    if (sample.image.width != step.width || sample.image.height != step.height)
      throw std::logic_error("sample " + sample.meta.path + " is " +
                             std::to_string(sample.image.width) + "x" +
                             std::to_string(sample.image.height) + ", the batch " +
                             std::to_string(step.width) + "x" + std::to_string(step.height));
    float* image = batch.images.get() + i * batch.image_floats();
    if (resized) {
      to_planar_float(sample.image, planes.data());
      const size_t plane_in = size_t(step.width) * step.height;
      const size_t plane_out = size_t(batch.width) * batch.height;
      for (size_t c = 0; c < 3; ++c)
        resize_plane_bilinear(planes.data() + c * plane_in, step.width, step.height,
                              image + c * plane_out, batch.width, batch.height);
    } else {
      to_planar_float(sample.image, image);
    }
    for (const LabelBox& box : sample.labels)
      batch.targets.insert(batch.targets.end(),
                           {float(i), float(box.class_id), box.cx, box.cy, box.w, box.h});
    batch.meta.push_back(std::move(sample.meta));
  }
  return batch;
}

}  // namespace bareyolo::data
