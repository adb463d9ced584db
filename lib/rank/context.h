// The per-rank context, built once per process: world, the DP x SP grid and its groups, placement
// and binding, the device with its named streams, the collective transport and the comm lane.
#pragma once

#include <memory>
#include <string>

#include "comm/group.h"
#include "comm/lane.h"
#include "comm/world.h"
#include "config/config.h"
#include "core/log.h"
#include "core/trace.h"
#include "rank/device_comm.h"
#include "rank/device_set.h"
#include "topo/topo.h"

namespace sof::rank {

// World = DP x SP. Rank r has sp_rank = r % sp (consecutive ranks share a sequence, so an SP group
// sits on one node when sp <= ranks per node) and dp_rank = r / sp.
struct Grid {
    int world = 1, rank = 0;
    int dp = 1, sp = 1;
    int dp_rank = 0, sp_rank = 0;
};
// Throws a Config error naming parallel.sp when world % sp != 0 or sp < 1.
Grid make_grid(int world, int rank, int sp);

struct ContextOptions {
    bool force_staged = false; // tests: stage device collectives even when not needed
};

class Context {
  public:
    // collective: all ranks of world
    Context(const config::Config& cfg, const comm::World& world, const core::Log& log,
            core::Trace* trace, const ContextOptions& opts = {});
    ~Context();
    Context(const Context&) = delete;
    Context& operator=(const Context&) = delete;

    const comm::World& world() const { return world_; }
    const Grid& grid() const { return grid_; }
    // All ranks, for the main thread's small collectives (norm partials, losses, agreement).
    comm::Group& all() { return *all_; }
    // All ranks again (its own communicator), used only from the comm lane: ZeRO-3 allgathers
    // and reduce-scatters (every rank computes grads of every parameter, so the whole world is
    // the data-parallel group of the parameters, as DeepSpeed's sequence-data-parallel group).
    comm::Group& shard() { return *shard_; }
    comm::Group& dp() { return *dp_; } // ranks with this rank's sp_rank
    comm::Group& sp() { return *sp_; } // the ranks holding slices of this rank's sequences
    comm::Lane& lane() { return *lane_; }
    DeviceSet& devices() { return *devs_; }
    device::Device& device() { return devs_->device(); }
    // Device-buffer collectives over shard(), used only from the comm lane (on the comm stream).
    DeviceComm& shard_device_comm() { return *shard_dc_; }
    // Device-buffer collectives over sp() (the Ulysses all-to-alls, from the model's thread, on a
    // stream of their own); null when parallel.sp is 1.
    DeviceComm* sp_device_comm() { return sp_dc_.get(); }
    Transport transport() const { return transport_; }
    const topo::Placement& placement() const { return placement_; }
    bool bound() const { return bound_; }
    // Bytes moved by every group of this rank since construction (sum over groups).
    comm::CommBytes bytes() const;

  private:
    void bind_rank(const config::Config& cfg, const core::Log& log);
    const comm::World& world_;
    Grid grid_;
    std::unique_ptr<comm::Group> all_, shard_, dp_, sp_;
    topo::Placement placement_;
    bool bound_ = false;
    std::unique_ptr<DeviceSet> devs_;
    Transport transport_ = Transport::Direct;
    std::unique_ptr<DeviceComm> shard_dc_;
    std::unique_ptr<device::Stream> sp_stream_; // staging copies of sp_dc_
    std::unique_ptr<DeviceComm> sp_dc_;
    std::unique_ptr<comm::Lane> lane_; // last: joined first
};

} // namespace sof::rank
