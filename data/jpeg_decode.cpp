// data/jpeg_decode.cpp — TurboJPEG calls (see jpeg_decode.h).
#include "data/jpeg_decode.h"

#include <turbojpeg.h>

#include <algorithm>
#include <stdexcept>

namespace bareyolo::data {

namespace {

// One decompressor per thread: the loader's threads decode at the same time, and a tjhandle
// must not be shared between concurrent calls. It is made on the thread's first JPEG and
// destroyed when the thread ends, or after a call that failed (take_failure).
class ThreadDecompressor {
 public:
  ThreadDecompressor() = default;
  ~ThreadDecompressor() { discard(); }
  ThreadDecompressor(const ThreadDecompressor&) = delete;
  ThreadDecompressor& operator=(const ThreadDecompressor&) = delete;

  tjhandle get() {
    if (handle_ == nullptr) handle_ = tjInitDecompress();
    // It fails only when it cannot allocate its few kilobytes.
    if (handle_ == nullptr)
      throw std::runtime_error(std::string("TurboJPEG cannot make a decompressor: ") +
                               tjGetErrorStr2(nullptr));
    return handle_;
  }

  // Why the last call failed; the handle is then discarded. TurboJPEG 2.1 leaves a handle whose
  // header could not be read stuck in that header: every later call on it fails with the same
  // message (a corrupt file would spoil the thread's next good ones). A new one costs little.
  std::string take_failure() {
    std::string reason = tjGetErrorStr2(handle_);
    discard();
    return reason;
  }

 private:
  void discard() {
    if (handle_ != nullptr) tjDestroy(handle_);
    handle_ = nullptr;
  }

  tjhandle handle_ = nullptr;
};

ThreadDecompressor& thread_decompressor() {
  thread_local ThreadDecompressor decompressor;
  return decompressor;
}

// The smallest of TurboJPEG's scaling factors 1/2, 1/4, 1/8 that keeps the long side at least
// `min_long_side`, else 1/1. Only these: the power-of-two reductions have libjpeg's dedicated
// reduced IDCTs (4x4, 2x2 and the DC value alone); 5/8, 3/4 and 7/8 take its general scaled
// ones and cost more than a full decode (coco128). The bilinear resize after the chosen one is
// left less than a factor of 2 to do, unless 1/8 is still too large.
tjscalingfactor reduction_for(const JpegHeader& header, int min_long_side) {
  tjscalingfactor chosen = {1, 1};
  if (min_long_side <= 0) return chosen;
  const int long_side = std::max(header.width, header.height);
  int count = 0;
  const tjscalingfactor* factors = tjGetScalingFactors(&count);
  for (int i = 0; i < count; ++i) {
    const tjscalingfactor& factor = factors[i];
    const bool power_of_two_reduction = factor.num == 1 && factor.denom > 1;
    if (power_of_two_reduction && factor.denom > chosen.denom &&
        TJSCALED(long_side, factor) >= min_long_side)
      chosen = factor;
  }
  return chosen;
}

}  // namespace

bool has_jpeg_signature(const uint8_t* bytes, size_t size) {
  return size >= 3 && bytes[0] == 0xFF && bytes[1] == 0xD8 && bytes[2] == 0xFF;
}

JpegHeader read_jpeg_header(const uint8_t* bytes, size_t size) {
  ThreadDecompressor& decompressor = thread_decompressor();
  int width = 0, height = 0, subsampling = 0, colorspace = 0;
  JpegHeader header;
  // Any -1 is a failure here, a warning included: TurboJPEG 2.1 flags a header it read with a
  // warning the same way, and the sizes it returns on a failure are not to be trusted.
  if (tjDecompressHeader3(decompressor.get(), bytes, size, &width, &height, &subsampling,
                          &colorspace) != 0) {
    header.error = decompressor.take_failure();
    return header;
  }
  header.width = width;
  header.height = height;
  header.converts_to_rgb = colorspace != TJCS_CMYK && colorspace != TJCS_YCCK;
  return header;
}

JpegPixels decode_jpeg(const uint8_t* bytes, size_t size, const JpegHeader& header,
                       int min_long_side) {
  const tjscalingfactor reduction = reduction_for(header, min_long_side);
  JpegPixels decoded;
  decoded.image = Image(TJSCALED(header.width, reduction), TJSCALED(header.height, reduction), 0);
  ThreadDecompressor& decompressor = thread_decompressor();
  // TJFLAG_STOPONWARNING: a damaged file stops at its first warning instead of being decoded to
  // the end for pixels that are then discarded. Given the scaled size, TurboJPEG picks the
  // factor that gives it.
  if (tjDecompress2(decompressor.get(), bytes, size, decoded.image.pixels.data(),
                    decoded.image.width, 0, decoded.image.height, TJPF_RGB,
                    TJFLAG_STOPONWARNING) != 0)
    decoded.error = decompressor.take_failure();
  return decoded;
}

}  // namespace bareyolo::data
