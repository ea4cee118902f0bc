// data/image_upload.cpp — see image_upload.h.
#include "data/image_upload.h"

namespace bareyolo::data {

Tensor ImageUploader::images_tensor(const Batch& batch) {
  Buffer& buffer = buffers_[next_];
  next_ = (next_ + 1) % buffers_.size();
  const Shape4 shape{batch.size, batch.height, batch.width, 3};
  if (!buffer.bytes.defined() || buffer.bytes.numel() < shape.numel()) {
    buffer.bytes = Tensor::empty({1, 1, 1, shape.numel()}, device_, DType::u8);
    buffer.last_read = mark_device_work(device_);  // the allocator's block: see the header
  }
  Tensor bytes = buffer.bytes.prefix(shape);
  read_by_device(batch.images,
                 upload_beside_compute(bytes.view<uint8_t>().data, device_, batch.images.get(),
                                       size_t(shape.numel()), buffer.last_read));
  Tensor input = batch.input_from_bytes(bytes);
  buffer.last_read = mark_device_work(device_);
  return input;
}

}  // namespace bareyolo::data
