// engine/step_scalars.cpp — see step_scalars.h.
#include "engine/step_scalars.h"

#include <cstring>
#include <stdexcept>
#include <string>

#include "kernels/staged_copies.h"

namespace bareyolo {

StepScalars::StepScalars(Device device)
    : block_(Tensor::zeros({1, 1, 1, int64_t(kBytes)}, device, DType::u8)) {}

StepScalars::Slot StepScalars::reserve_bytes(size_t bytes) {
  const size_t offset = (reserved_ + 15) / 16 * 16;
  if (offset + bytes > kBytes)
    throw std::logic_error("StepScalars: a slot of " + std::to_string(bytes) + " bytes at " +
                           std::to_string(offset) + " does not fit the block's " +
                           std::to_string(kBytes) + " bytes; raise StepScalars::kBytes");
  reserved_ = offset + bytes;
  return {offset, bytes};
}

void StepScalars::set_bytes(Slot slot, const void* data, size_t bytes) {
  if (bytes != slot.bytes)
    throw std::logic_error("StepScalars::set: " + std::to_string(bytes) + " bytes for a slot of " +
                           std::to_string(slot.bytes));
  if (std::memcmp(host_.data() + slot.offset, data, bytes) == 0) return;
  std::memcpy(host_.data() + slot.offset, data, bytes);
  changed_ = true;
}

const std::byte* StepScalars::device_bytes(Slot slot) {
  upload();
  return reinterpret_cast<const std::byte*>(block_.view<uint8_t>().data) + slot.offset;
}

void StepScalars::upload() {
  if (!changed_) return;
  upload_without_waiting(block_.view<uint8_t>().data, block_.device(), host_.data(), reserved_);
  changed_ = false;
  ++uploads_;
}

}  // namespace bareyolo
