// The host device: a real implementation of device.h on the CPU. Device memory is a capacity-
// limited arena (device.memory_gb), streams are worker threads, events use condition variables.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "device/device.h"

namespace sof::device {

class HostDevice : public Device {
  public:
    // capacity_bytes: arena limit; trace (may be null): one lane per stream ("stream <name>").
    HostDevice(size_t capacity_bytes, core::Trace* trace);
    ~HostDevice() override;

    Kind kind() const override { return Kind::Host; }
    int ordinal() const override { return 0; }
    std::string describe() const override;
    bool host_accessible() const override { return true; }

    void* alloc(size_t bytes, const std::string& what) override;
    void free(void* p) noexcept override;
    size_t capacity() const override { return capacity_; }
    size_t used() const override;
    size_t peak() const override;
    void* alloc_pinned(size_t bytes, const std::string& what) override;
    void free_pinned(void* p) noexcept override;
    size_t pinned_used() const; // bytes of pinned host memory allocated now (rounded)

    std::unique_ptr<Stream> create_stream(const std::string& name) override;
    std::unique_ptr<Event> create_event() override;
    std::unique_ptr<Event> create_timing_event() override;
    double elapsed_ms(Event& start, Event& end) override;
    void record(Event& e, Stream& s) override;
    void wait(Stream& s, Event& e) override;
    void synchronize(Stream& s) override;
    void synchronize() override;

    void copy(void* dst, const void* src, size_t bytes, CopyKind kind, Stream& s) override;
    void memset(void* dst, int value, size_t bytes, Stream& s) override;
    void host_task(Stream& s, std::function<void()> fn, const std::string& name) override;

    void launch(Stream& s, const std::string& name,
                std::function<void(const kernels::Exec&)> op) override;

    struct Registry; // live streams, for synchronize()

  private:
    size_t capacity_;
    core::Trace* trace_;
    mutable std::mutex mu_;
    std::unordered_map<void*, size_t> device_allocs_; // ptr -> bytes (rounded)
    std::unordered_map<void*, std::string> device_names_;
    std::unordered_map<void*, size_t> pinned_allocs_;
    size_t used_ = 0, peak_ = 0;
    std::shared_ptr<Registry> registry_;
};

} // namespace sof::device
