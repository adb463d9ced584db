// Rank context (see context.h): grid and groups, NUMA placement and binding from the launcher's
// local rank, the device and streams, and the collective transport (logged by every rank).
#include "rank/context.h"

#include <cstring>
#include <vector>

#include "core/error.h"

namespace sof::rank {

Grid make_grid(int world, int rank, int sp) {
    if (sp < 1) SOF_FAIL(Config, "parallel.sp = %d must be >= 1", sp);
    if (world % sp != 0)
        SOF_FAIL(Config,
                 "parallel.sp = %d does not divide the %d ranks of this job (world = DP x SP): "
                 "launch a multiple of %d ranks or change parallel.sp",
                 sp, world, sp);
    Grid g;
    g.world = world;
    g.rank = rank;
    g.sp = sp;
    g.dp = world / sp;
    g.sp_rank = rank % sp;
    g.dp_rank = rank / sp;
    return g;
}

Context::Context(const config::Config& cfg, const comm::World& world, const core::Log& log,
                 core::Trace* trace, const ContextOptions& opts)
    : world_(world), grid_(make_grid(world.size(), world.rank(), cfg.parallel.sp)) {
    all_ = std::make_unique<comm::Group>(world.comm(), 0, world.rank(), "world");
    shard_ = std::make_unique<comm::Group>(world.comm(), 0, world.rank(), "zero");
    dp_ = std::make_unique<comm::Group>(world.comm(), grid_.sp_rank, grid_.dp_rank, "dp");
    sp_ = std::make_unique<comm::Group>(world.comm(), grid_.dp_rank, grid_.sp_rank, "sp");
    bind_rank(cfg, log);
    devs_ = std::make_unique<DeviceSet>(cfg.device, placement_.local_rank, trace);
    std::string why;
    const std::string& forced = cfg.debug.collectives;
    if (forced == "cuda_aware") {
        transport_ = Transport::CudaAware;
        why = "forced by debug.collectives";
    } else {
        transport_ =
            choose_transport(*devs_, *shard_, opts.force_staged || forced == "staged", &why);
        if (forced == "staged") why = "forced by debug.collectives";
    }
    shard_dc_ = std::make_unique<DeviceComm>(*devs_, *shard_, transport_);
    if (grid_.sp > 1) {
        sp_stream_ = devs_->device().create_stream("sp comm");
        sp_dc_ = std::make_unique<DeviceComm>(*devs_, *sp_, transport_, 4u << 20, sp_stream_.get());
    }
    lane_ = std::make_unique<comm::Lane>("comm lane", trace);
    log.all("rank %d/%d: dp %d/%d sp %d/%d, local rank %d/%d, %s; collectives: %s (%s)", grid_.rank,
            grid_.world, grid_.dp_rank, grid_.dp, grid_.sp_rank, grid_.sp, placement_.local_rank,
            placement_.local_size, devs_->device().describe().c_str(), transport_name(transport_),
            why.c_str());
}

Context::~Context() {
    lane_.reset();
    sp_dc_.reset();
    sp_stream_.reset();
    shard_dc_.reset();
    devs_.reset();
}

comm::CommBytes Context::bytes() const {
    comm::CommBytes b;
    for (const comm::Group* g : {all_.get(), shard_.get(), dp_.get(), sp_.get()}) {
        comm::CommBytes x = g->bytes();
        for (int i = 0; i < comm::kNumCollKinds; i++) {
            b.sent[static_cast<size_t>(i)] += x.sent[static_cast<size_t>(i)];
            b.recv[static_cast<size_t>(i)] += x.recv[static_cast<size_t>(i)];
        }
    }
    return b;
}

// Binds this rank's threads and memory to the NUMA node nearest its GPU (one rank per Superchip).
// The local rank comes from the launcher (SLURM_LOCALID, OMPI_COMM_WORLD_LOCAL_RANK, ...) or,
// failing that, MPI_Comm_split_type. A failed bind (a container that forbids mbind, a cpuset
// smaller than the node) costs speed, not correctness: reported with the fix, the run goes on.
void Context::bind_rank(const config::Config& cfg, const core::Log& log) {
    const int lr = topo::local_rank_from_env(world_.local_rank());
    const int ls = topo::local_size_from_env(world_.local_size());
    placement_.local_rank = lr;
    placement_.local_size = ls;
    if (!cfg.parallel.bind) return;
    try {
        placement_ = topo::plan_placement("", lr, ls);
        topo::bind(placement_);
        bound_ = true;
        // what the kernel now says this thread may run on (tests compare it with the plan)
        log.all("rank %d bind: %s; running on PUs %s", world_.rank(), placement_.describe().c_str(),
                topo::current_binding().c_str());
        // first touch after binding must land on the rank's node (on GH200 not in the GPU's
        // HBM); 2 MiB is above malloc's mmap threshold, so these are fresh pages
        std::vector<char> probe(1 << 21);
        std::memset(probe.data(), 1, probe.size());
        int node = topo::memory_node_of(probe.data());
        if (node >= 0 && placement_.numa_node >= 0 && node != placement_.numa_node)
            log.warn("bind: new memory lands on NUMA node %d, not on node %d: check the "
                     "launcher's --mem-bind / numactl settings",
                     node, placement_.numa_node);
    } catch (const std::exception& e) {
        placement_.local_rank = lr;
        placement_.local_size = ls;
        log.warn("bind: not bound (%s); set parallel.bind: false to skip binding, or launch "
                 "with srun --cpu-bind=none",
                 e.what());
    }
}

} // namespace sof::rank
