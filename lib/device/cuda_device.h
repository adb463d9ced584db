// The CUDA device: device.h on an NVIDIA GPU (cudaMalloc memory with capacity accounting,
// cudaHostAlloc pinned memory, streams, events, async copies, host tasks, kernel launches).
#pragma once

#include <memory>

#include "device/device.h"

namespace sof::device {

// Creates the CUDA device cfg.id, or (cfg.id < 0) local_rank modulo the number of visible GPUs.
// capacity() is the GPU's memory, or device.memory_gb when that is set and smaller. trace (may be
// null) gets one lane per stream with the host tasks run on it. Throws core::Error (Config) when
// no GPU is visible or cfg.id is out of range, naming the devices found.
std::unique_ptr<Device> make_cuda_device(const config::DeviceConfig& cfg, int local_rank,
                                         core::Trace* trace);

// Number of visible CUDA devices; 0 when there is none or the driver cannot be used (never throws).
int cuda_device_count();

} // namespace sof::device
