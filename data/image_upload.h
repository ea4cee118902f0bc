// data/image_upload.h — the trainer's way to put each batch's images on its device: the bytes go
// up on the device's copy stream into one of two device buffers used in turn, so that batch
// k+1's copy runs while step k still computes (Batch::images_tensor's copy waits behind the
// step on the compute stream). The input is then made on the compute stream as images_tensor
// makes it, after the copy.
//
// Why two buffers and not the caching allocator's memory: a block the allocator hands out may
// still be in use by compute-stream work queued before (its reuse is ordered on the compute
// stream only), which a copy beside that stream would overwrite. A buffer of the uploader is
// written only after the compute stream has finished reading it (the event recorded after the
// input was made from it); a new or grown buffer waits, once, for all the work queued before it.
#pragma once

#include <array>

#include "data/batch.h"
#include "engine/tensor.h"
#include "kernels/device_memory.h"

namespace bareyolo::data {

class ImageUploader {
 public:
  explicit ImageUploader(Device device) : device_(device) {}

  // Batch::images_tensor(device): the model's input, float NCHW on the device, the same
  // values; the batch's host buffer is kept until its copy has completed.
  Tensor images_tensor(const Batch& batch);

 private:
  struct Buffer {
    Tensor bytes;           // u8 on the device, grown to the largest batch seen
    DeviceEvent last_read;  // the compute stream's last work reading `bytes`
  };
  Device device_;
  std::array<Buffer, 2> buffers_;
  size_t next_ = 0;  // the buffer the next batch goes to
};

}  // namespace bareyolo::data
