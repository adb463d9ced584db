// The device of one rank and its named streams (compute, d2h, h2d, device step, weight fetch,
// comm), built once and shared by the model side, the engine and the collectives.
#pragma once

#include <memory>

#include "config/config.h"
#include "core/trace.h"
#include "device/device.h"

namespace sof::rank {

class DeviceSet {
  public:
    // local_rank picks the GPU when cfg.id < 0 (local_rank modulo the visible GPUs).
    DeviceSet(const config::DeviceConfig& cfg, int local_rank, core::Trace* trace);
    ~DeviceSet();
    DeviceSet(const DeviceSet&) = delete;
    DeviceSet& operator=(const DeviceSet&) = delete;

    device::Device& device() { return *dev_; }
    device::Stream& compute() { return *compute_; } // forward/backward, grad zeroing
    device::Stream& d2h() { return *d2h_; }         // grad statistics + device-to-host copies
    device::Stream& h2d() { return *h2d_; }         // updated parameters host-to-device
    device::Stream& dstep() { return *dstep_; }     // optimizer steps of device-resident buckets
    device::Stream& fetch() { return *fetch_; }     // weight flow: units fetched ahead of use
    device::Stream& comm() { return *comm_; }       // staging copies of device-buffer collectives

  private:
    std::unique_ptr<device::Device> dev_; // first: destroyed after the streams
    std::unique_ptr<device::Stream> compute_, d2h_, h2d_, dstep_, fetch_, comm_;
};

} // namespace sof::rank
