// kernels/cuda/runtime/runtime.cu — device discovery, memory (through the caching allocator),
// copies, the per-device compute stream and events on it (see runtime.h). A machine without a
// driver answers cudaGetDeviceCount with cudaErrorInsufficientDriver and leaves the count
// unwritten: that is "0 GPUs", not a crash.
#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "kernels/cuda/runtime/allocator.h"
#include "kernels/cuda/runtime/check.h"
#include "kernels/cuda/runtime/graph.h"
#include "kernels/cuda/runtime/runtime.h"
#include "kernels/cuda/runtime/stream.h"
#include "kernels/step_guard.h"

namespace bareyolo::cuda {

namespace {
std::atomic<bool> touched{false};
std::atomic<bool> tf32{false};
std::atomic<bool> deterministic{true};
std::atomic<uint64_t> waits{0};
std::atomic<uint64_t> queued{0};  // launches(); relaxed: a tally, it orders nothing

struct Discovery {
  int count = 0;
  std::string reason;
};

const Discovery& discovery() {
  static const Discovery result = [] {
    Discovery d;
    int count = 0;  // left unwritten on failure
    cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess) {
      (void)cudaGetLastError();
      d.reason = std::string("no usable CUDA driver or device (") + cudaGetErrorName(status) +
                 ": " + cudaGetErrorString(status) + ")";
    } else if (count == 0) {
      d.reason = "the CUDA driver reports no devices";
    }
    d.count = status == cudaSuccess ? count : 0;
    // A driver that found a device is initialised now, and its state does not survive fork();
    // without a driver or a device there is nothing a child could inherit.
    touched = d.count > 0;
    return d;
  }();
  return result;
}

// The device this process works on: the first one it asked for (-1 before). Pinned memory
// names no device, so its calls make this one the calling thread's current device first: a
// thread that never chose one (a loader's worker, taking a pinned buffer) would otherwise
// create a context on GPU 0 in every rank, whatever the rank's device.
std::atomic<int> home_device{-1};

void enter_home_device() {
  const int device = home_device.load(std::memory_order_relaxed);
  if (device >= 0) (void)cudaSetDevice(device);
}

void require_device(int device) {
  if (device < 0 || device >= device_count())
    throw std::runtime_error("CUDA device " + std::to_string(device) + " does not exist: " +
                             (device_count() == 0
                                  ? unavailable_reason()
                                  : std::to_string(device_count()) + " device(s) visible"));
  int unset = -1;
  home_device.compare_exchange_strong(unset, device, std::memory_order_relaxed);
  BAREYOLO_CUDA_CHECK(cudaSetDevice(device));
}
}  // namespace

bool compiled() { return true; }
int device_count() { return discovery().count; }
bool initialized() { return touched; }
std::string unavailable_reason() { return discovery().reason; }
void set_tf32(bool enabled) { tf32 = enabled; }
bool tf32_enabled() { return tf32; }
void set_cudnn_deterministic(bool enabled) { deterministic = enabled; }
bool cudnn_deterministic() { return deterministic; }

// Device memory comes from the device's caching allocator (allocator.h), cached per compute
// stream: every kernel of the engine runs on that stream.
MemoryInfo memory_info(int device) {
  require_device(device);
  MemoryInfo info;
  BAREYOLO_CUDA_CHECK(cudaMemGetInfo(&info.free, &info.total));
  return info;
}

void* malloc_device(size_t bytes, int device, bool* from_backing) {
  require_device(device);
  // A capture's allocations come from its graph's pool (graph.h), the others from the stream's.
  const void* pool = capture_pool();
  return device_allocator(device).allocate(bytes, pool ? pool : compute_stream(device),
                                           from_backing);
}

void free_device(void* pointer, int device) noexcept {
  if (!pointer) return;
  try {
    device_allocator(device).release(pointer);
  } catch (const std::exception& error) {
    // A foreign or doubly freed pointer is a bug in the caller; memory is already corrupt.
    std::fprintf(stderr, "bareyolo: free_device: %s\n", error.what());
    std::abort();
  }
}

void* malloc_pinned(size_t bytes) {
  if (device_count() == 0)
    throw std::runtime_error("pinned memory needs a GPU: " + unavailable_reason());
  enter_home_device();
  void* pointer = nullptr;
  BAREYOLO_CUDA_CHECK(cudaHostAlloc(&pointer, bytes == 0 ? 1 : bytes, cudaHostAllocPortable));
  return pointer;
}

void free_pinned(void* pointer) noexcept {
  if (!pointer) return;
  enter_home_device();
  cudaFreeHost(pointer);
}

bool is_pinned(const void* pointer) {
  enter_home_device();
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, pointer) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return attributes.type == cudaMemoryTypeHost;
}

namespace {

// Each device's stream of one kind, created on first use (non-blocking: the legacy default
// stream must not serialise them), with `device` made the calling thread's current one. Every
// kernel launch looks its stream up here, so the lookup takes no lock: a stream, once
// published, never changes; only its creation is serialised.
using StreamSlots = std::array<std::atomic<cudaStream_t>, 64>;
cudaStream_t stream_created_once(StreamSlots& streams, int device) {
  require_device(device);
  std::atomic<cudaStream_t>& slot = streams.at(static_cast<size_t>(device));
  if (const cudaStream_t stream = slot.load(std::memory_order_acquire)) return stream;
  static std::mutex creating;
  std::lock_guard<std::mutex> lock(creating);
  cudaStream_t stream = slot.load(std::memory_order_relaxed);
  if (!stream) {
    BAREYOLO_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    slot.store(stream, std::memory_order_release);
  }
  return stream;
}

}  // namespace

void* compute_stream(int device) {
  static StreamSlots streams{};
  return stream_created_once(streams, device);
}

Event upload_beside_compute(void* dst, const void* src, size_t bytes, int device,
                            const Event& after) {
  static StreamSlots copy_streams{};
  const cudaStream_t copy = stream_created_once(copy_streams, device);
  const cudaStream_t compute = stream_of(device);  // sets the device
  if (after.recorded())
    BAREYOLO_CUDA_CHECK(cudaStreamWaitEvent(copy, static_cast<cudaEvent_t>(after.event_), 0));
  BAREYOLO_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, copy));
  cudaEvent_t event = nullptr;
  BAREYOLO_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  Event copied(event, device);  // destroyed if recording fails
  BAREYOLO_CUDA_CHECK(cudaEventRecord(event, copy));
  BAREYOLO_CUDA_CHECK(cudaStreamWaitEvent(compute, event, 0));
  return copied;
}

void copy_async(void* dst, const void* src, size_t bytes, CopyKind kind, int device) {
  static constexpr cudaMemcpyKind kinds[] = {cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost,
                                             cudaMemcpyDeviceToDevice};
  BAREYOLO_CUDA_CHECK(
      cudaMemcpyAsync(dst, src, bytes, kinds[static_cast<int>(kind)], stream_of(device)));
}

void copy(void* dst, const void* src, size_t bytes, CopyKind kind, int device,
          SourceLocation where) {
  copy_async(dst, src, bytes, kind, device);
  if (kind != CopyKind::device_to_device) synchronize(device, where);
}

void fill_bytes(void* pointer, int byte, size_t bytes, int device) {
  BAREYOLO_CUDA_CHECK(cudaMemsetAsync(pointer, byte, bytes, stream_of(device)));
}

void synchronize(int device, SourceLocation where) {
  ++waits;
  step_guard::report(step_guard::Event::host_wait, "a stream synchronize", where);
  BAREYOLO_CUDA_CHECK(cudaStreamSynchronize(stream_of(device)));
}

// Events are created without timing (cudaEventDisableTiming): they only order work, and
// timing makes cudaEventRecord slower.
Event Event::record(int device) {
  const cudaStream_t stream = stream_of(device);  // sets the device
  cudaEvent_t event = nullptr;
  BAREYOLO_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  Event marked(event, device);  // destroyed if recording fails
  BAREYOLO_CUDA_CHECK(cudaEventRecord(event, stream));
  return marked;
}

Event::~Event() {
  if (!event_) return;
  (void)cudaSetDevice(device_);  // see complete()
  (void)cudaEventDestroy(static_cast<cudaEvent_t>(event_));
}

bool Event::complete() const {
  if (!event_) return true;
  // The event's device made current: a thread that never chose one (a loader's worker) would
  // otherwise create a context on GPU 0.
  BAREYOLO_CUDA_CHECK(cudaSetDevice(device_));
  const cudaError_t status = cudaEventQuery(static_cast<cudaEvent_t>(event_));
  if (status == cudaErrorNotReady) {
    (void)cudaGetLastError();
    return false;
  }
  BAREYOLO_CUDA_CHECK(status);
  return true;
}

void Event::synchronize(SourceLocation where) const {
  if (!event_) return;
  ++waits;
  step_guard::report(step_guard::Event::host_wait, "an event synchronize", where);
  BAREYOLO_CUDA_CHECK(cudaSetDevice(device_));  // see complete()
  BAREYOLO_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(event_)));
}

uint64_t host_waits() { return waits; }

void count_launch() noexcept { queued.fetch_add(1, std::memory_order_relaxed); }
uint64_t launches() { return queued.load(std::memory_order_relaxed); }

}  // namespace bareyolo::cuda
