// kernels/cuda/runtime/runtime.h — the CUDA runtime as the rest of the engine sees it: device
// discovery that never crashes, whether a GPU is required, device memory, copies, one compute
// stream per device and events on it, and the TF32 switch. Compiles in every build; without CUDA
// (WITH_CUDA=OFF) device_count() is 0, no Event can be recorded (an empty one is complete) and the
// rest throws a clear error (runtime_none.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>
#include <utility>

#include "kernels/source_location.h"

namespace bareyolo::cuda {

// True when this binary contains the CUDA backend.
bool compiled();
// Number of usable GPUs: 0 without CUDA, without a driver (cudaErrorInsufficientDriver) or
// without a device. Never throws.
int device_count();
// Why device_count() is 0, as a sentence for the user ("" when it is not).
std::string unavailable_reason();
// True once this process has initialised CUDA on a machine with a GPU (device_count()
// included). A process that has must not fork workers that use CUDA: the driver's state does
// not survive fork(), so the launcher checks this first. Without a driver or a device there is
// no such state, and it stays false.
bool initialized();

// The CUDA backend's on/off switches in the environment (BAREYOLO_REQUIRE_GPU,
// BAREYOLO_CUDNN_LOG): unset or "" gives `otherwise`, "0" false,
// anything else true.
inline bool environment_flag(const char* name, bool otherwise) {
  const char* value = std::getenv(name);
  if (!value || !*value) return otherwise;
  return std::string(value) != "0";
}

// Why this machine must have a usable GPU, or "" when it need not: BAREYOLO_REQUIRE_GPU is on,
// or /dev/nvidia0 exists (an NVIDIA driver is installed). Test runners and GPU benches exit 77
// (*skipped*) when device_count() is 0, but where a GPU is required they must fail instead: a
// broken driver or library must never read as skipped.
inline std::string gpu_required_reason() {
  if (environment_flag("BAREYOLO_REQUIRE_GPU", false))
    return std::string("BAREYOLO_REQUIRE_GPU=") + std::getenv("BAREYOLO_REQUIRE_GPU") + " is set";
  std::error_code error;  // a path that cannot be checked counts as absent
  if (std::filesystem::exists("/dev/nvidia0", error)) return "/dev/nvidia0 exists";
  return "";
}
inline bool gpu_required() { return !gpu_required_reason().empty(); }

// TF32 tensor-core math for float convolutions (cuDNN) and GEMMs (cuBLAS): off by default, so
// results stay within float rounding of the CPU reference. On, cuDNN and cuBLAS may round the
// operands to TF32's 10-bit mantissa before each product (sums stay float), about 1e-3 relative
// error per product, for the tensor cores' throughput. Process-wide and read at every call; the
// cuDNN algorithm choice is cached per setting. Without CUDA the value is only recorded.
void set_tf32(bool enabled);
bool tf32_enabled();

// Which cuDNN convolution algorithms may run (--cudnn): on (the default, as YOLOv5's train.py
// asks of PyTorch), the fastest deterministic one wherever cuDNN has one, so a run repeats its
// bits; off, the fastest of all, which may sum with atomics (on an H200, with cuDNN's
// first-ranked algorithms before they were timed, float32 yolov5s at 640 trained at 307 img/s
// instead of 203). Process-wide; the choices are kept per setting (cudnn_conv.cpp). Without CUDA
// the value is only recorded.
void set_cudnn_deterministic(bool enabled);
bool cudnn_deterministic();

// Free and total memory of `device` as the driver reports them (cudaMemGetInfo).
struct MemoryInfo {
  size_t free = 0, total = 0;
};
MemoryInfo memory_info(int device);

// `from_backing`, when given: whether the block came from cudaMalloc rather than the cache.
void* malloc_device(size_t bytes, int device, bool* from_backing = nullptr);
void free_device(void* pointer, int device) noexcept;
// Page-locked host memory: copies from it to a GPU run asynchronously and at full speed.
void* malloc_pinned(size_t bytes);
void free_pinned(void* pointer) noexcept;
// True when `pointer` is page-locked host memory (for tests).
bool is_pinned(const void* pointer);
enum class CopyKind { host_to_device, device_to_host, device_to_device };
// Ordered on the device's compute stream, and complete when it returns when the host is one
// side of it; a copy between two buffers of the device is ordered like a kernel and not waited
// for (nothing on the host needs it done; the step and a CUDA graph of it must not wait). The
// waits here (copy, synchronize, Event::synchronize) are reported to the step guard at `where`.
void copy(void* dst, const void* src, size_t bytes, CopyKind kind, int device,
          SourceLocation where = SourceLocation::current());
// Queued on the device's compute stream; returns at once. Host memory on either side must
// stay as it is (and allocated) until an Event recorded after this call completes; pinned
// host memory makes the copy truly asynchronous (pageable memory is staged before return).
void copy_async(void* dst, const void* src, size_t bytes, CopyKind kind, int device);
class Event;
// A host-to-device copy beside the compute stream: queued on the device's copy stream, a
// second stream, so that it runs while the compute stream works (the next batch's images while
// a step computes). It starts once `after` (an Event of the compute stream: the last work that
// uses `dst`) has completed, and the compute stream's work queued after this call waits for it.
// The returned Event completes with the copy; `src` (pinned) must stay as it is until then.
Event upload_beside_compute(void* dst, const void* src, size_t bytes, int device,
                            const Event& after);
// Sets every byte of [pointer, pointer + bytes) to `byte` on the compute stream.
void fill_bytes(void* pointer, int byte, size_t bytes, int device);
// The stream every kernel of `device` is launched on (a cudaStream_t).
void* compute_stream(int device);
void synchronize(int device, SourceLocation where = SourceLocation::current());
// How many times this process has waited on the host for device work (synchronize, copy,
// Event::synchronize), for tests that a step keeps the host out of its way.
uint64_t host_waits();
// How much work this process has queued on its GPUs: kernel launches and library calls queued
// (a cuBLAS or cuDNN call counts one, however many kernels it runs; so does a CUDA graph's
// launch, and the calls recorded into a graph count when recorded), every device's; copies,
// fills and NCCL's collectives are not counted. For the benches' launches per step: the fewer,
// the less the step pays in launch overhead.
uint64_t launches();

// A point in a device's compute stream: the work queued there before Event::record. A
// default-constructed Event marks no work and is complete. Move-only; destroying one whose
// work is still pending is safe (the driver releases it when the work completes).
class Event {
 public:
  Event() = default;
  // Marks everything queued so far on `device`'s compute stream.
  static Event record(int device);
  ~Event();
  Event(Event&& other) noexcept
      : event_(std::exchange(other.event_, nullptr)), device_(other.device_) {}
  Event& operator=(Event&& other) noexcept {
    if (this != &other) {
      Event replaced(std::move(*this));  // released when this scope ends
      event_ = std::exchange(other.event_, nullptr);
      device_ = other.device_;
    }
    return *this;
  }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  bool recorded() const { return event_ != nullptr; }
  // The marked work has finished; never blocks.
  bool complete() const;
  // The host waits until the marked work has finished.
  void synchronize(SourceLocation where = SourceLocation::current()) const;

 private:
  friend Event upload_beside_compute(void*, const void*, size_t, int, const Event&);
  Event(void* event, int device) : event_(event), device_(device) {}
  void* event_ = nullptr;  // a cudaEvent_t
  int device_ = 0;         // the device whose stream it was recorded on
};

}  // namespace bareyolo::cuda
