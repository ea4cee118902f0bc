// models/eval/decode.cu — the Detect head's inference decode on the GPU, one level per call;
// the formulas and the row order of models/eval/decode.h:
//   cx = (2 s_x - 0.5 + gx) * stride      cy = (2 s_y - 0.5 + gy) * stride
//   w  = (2 s_w)^2 * anchor_w * stride    h  = (2 s_h)^2 * anchor_h * stride
//   objectness and class scores = s       (s = sigmoid of the field, kernels/activation.h)
// The products are rounded in the CPU's order ((2 s)^2 * anchor, then * stride).
//
// The head is field-major (one plane per field) and the rows are cell-major (all fields of a
// cell together), so the decode is a transpose. One block takes a run of cells of one
// (image, anchor): it reads each field's run of cells (coalesced), decodes into a row-major
// tile in shared memory, and writes the tile's rows, which are consecutive in the output, as
// one contiguous range (coalesced).
#include <algorithm>
#include <stdexcept>
#include <string>

#include "kernels/activation.h"
#include "kernels/cuda/runtime/check.h"
#include "kernels/cuda/runtime/runtime.h"
#include "kernels/cuda/runtime/stream.h"
#include "models/eval/detect_cuda.h"

namespace bareyolo::cuda {

namespace {

constexpr size_t kMaxSharedBytes = 48 * 1024;
constexpr int kThreads = 256;

__global__ void decode_kernel(View<const float> head, models::DecodeLevel level,
                              int cells_per_block, int64_t chunks_per_plane, float* rows) {
  extern __shared__ float tile[];  // cells_per_block rows of level.outputs values
  const int64_t nx = head.shape.w, plane = head.shape.h * nx;
  const int outputs = level.outputs;
  const int64_t chunk = blockIdx.x % chunks_per_plane;
  const int64_t anchor = (blockIdx.x / chunks_per_plane) % level.anchors;
  const int64_t image = blockIdx.x / (chunks_per_plane * level.anchors);
  const int64_t first_cell = chunk * cells_per_block;
  const int cells =
      plane - first_cell < cells_per_block ? int(plane - first_cell) : cells_per_block;
  const float* fields = head.image(image) + anchor * outputs * plane + first_cell;

  for (int i = threadIdx.x; i < outputs * cells; i += blockDim.x) {
    const int field = i / cells, c = i % cells;
    const int64_t cell = first_cell + c;
    tile[c * outputs + field] = models::decoded_field(
        level, int(anchor), field, fields[field * plane + c], cell % nx, cell / nx);
  }
  __syncthreads();
  float* out =
      rows +
      (image * level.rows_per_image + level.first_row + anchor * plane + first_cell) * outputs;
  for (int i = threadIdx.x; i < outputs * cells; i += blockDim.x) out[i] = tile[i];
}

}  // namespace

// models::decode_level has checked the shapes before routing here.
void decode_level(View<const float> head, const models::DecodeLevel& level, View<float> rows) {
  const int64_t plane = head.shape.plane();
  if (head.shape.n == 0 || plane == 0) return;
  // 32 cells per block, fewer when the rows are too long for shared memory.
  const int cells_per_block =
      int(std::min<size_t>(32, kMaxSharedBytes / (size_t(level.outputs) * 4)));
  if (cells_per_block < 1)
    throw std::invalid_argument("decode_level: rows of " + std::to_string(level.outputs) +
                                " outputs are too long for the CUDA decode");
  const int64_t chunks = (plane + cells_per_block - 1) / cells_per_block;
  const int64_t blocks = head.shape.n * level.anchors * chunks;
  const size_t bytes = size_t(cells_per_block) * size_t(level.outputs) * sizeof(float);
  const cudaStream_t stream = stream_of(head.device);
  decode_kernel<<<unsigned(blocks), kThreads, bytes, stream>>>(head, level, cells_per_block, chunks,
                                                               rows.data);
  BAREYOLO_CUDA_CHECK_LAUNCH();
}

}  // namespace bareyolo::cuda
