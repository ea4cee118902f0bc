// bench/synthetic_batch.cpp — see synthetic_batch.h.
#include "bench/synthetic_batch.h"

#include <random>

namespace bareyolo::bench {

SyntheticBatch synthetic_batch(int batch, int imgsz, int classes, uint32_t seed,
                               const Device& device) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> unit(0, 1), centre(0.2f, 0.8f), side(0.05f, 0.4f);
  std::uniform_int_distribution<int> cls(0, classes - 1);
  std::vector<float> pixels(size_t(batch) * 3 * size_t(imgsz) * size_t(imgsz));
  for (float& v : pixels) v = unit(rng);
  SyntheticBatch out{Tensor::from_vector(pixels, {batch, 3, imgsz, imgsz}, device), {}};
  for (int image = 0; image < batch; ++image)
    for (int box = 0; box < kBoxesPerImage; ++box)
      out.labels.push_back({image, cls(rng), centre(rng), centre(rng), side(rng), side(rng)});
  return out;
}

}  // namespace bareyolo::bench
