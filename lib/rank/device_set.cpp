// DeviceSet (see device_set.h): creates the rank's device from the deck and its named streams.
// Stream names are the trace lane names of the host device.
#include "rank/device_set.h"

namespace sof::rank {

DeviceSet::DeviceSet(const config::DeviceConfig& cfg, int local_rank, core::Trace* trace)
    : dev_(device::make_device(cfg, local_rank, trace)) {
    compute_ = dev_->create_stream("compute");
    d2h_ = dev_->create_stream("d2h");
    h2d_ = dev_->create_stream("h2d");
    dstep_ = dev_->create_stream("device step");
    fetch_ = dev_->create_stream("weight fetch");
    comm_ = dev_->create_stream("comm staging");
}

DeviceSet::~DeviceSet() {
    try {
        dev_->synchronize();
    } catch (...) { // an abandoned step's error: nothing left to report it to
    }
    comm_.reset();
    fetch_.reset();
    dstep_.reset();
    h2d_.reset();
    d2h_.reset();
    compute_.reset();
}

} // namespace sof::rank
