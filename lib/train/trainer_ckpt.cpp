// The trainer's checkpoint and trace I/O (see trainer.h): sharded saves (atomic, the same cleanup
// as ckpt::save), resume and weight loading with resharding, the Chrome trace of the run.
#include "train/trainer_impl.h"

#include <mpi.h>
#include <omp.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <chrono>
#include <filesystem>
#include <thread>

#include "ckpt/checkpoint.h"
#include "ckpt/compat.h"
#include "ckpt/fileio.h"
#include "ckpt/hf.h"
#include "ckpt/llmc.h"
#include "comm/world.h"
#include "config/deck.h"
#include "core/error.h"
#include "core/timer.h"
#include "core/trace.h"
#include "data/loader.h"
#include "model/model.h"
#include "model/model_config.h"
#include "zero/shard.h"
#include "device/device.h"
#include "offload/memory_plan.h"
#include "offload/updater_factory.h"
#include "plan/planner.h"
#include "rank/context.h"
#include "sp/ulysses.h"
#include "train/metrics.h"
#include "train/run_dirs.h"
#include "train/batches.h"
#include "train/schedule.h"
#include "zero/sharded.h"

namespace sof::train {

namespace fs = std::filesystem;

// train.resume: auto: rank 0 looks for the newest checkpoint and every rank takes its choice
// (ranks that looked for themselves could pick different steps, e.g. on a file system that is
// not the same on every node, and then train different runs or hang in a collective). A rank
// that does not see the chosen directory fails the job on every rank with a Config error; an
// error of rank 0's search is raised on every rank. "" = no checkpoint yet.
// collective: all ranks of world
std::string Trainer::Impl::agreed_latest_checkpoint() {
    const std::string& root = cfg.train.checkpoint_dir;
    if (root.empty()) return "";
    if (world.size() == 1) return ckpt::find_latest(root);
    std::string chosen;
    int kind = -1; // rank 0's error kind, -1 = none
    if (world.rank() == 0) {
        try {
            chosen = ckpt::find_latest(root);
        } catch (const core::Error& e) {
            chosen = e.what();
            kind = static_cast<int>(e.kind());
        }
    }
    long long head[2] = {kind, static_cast<long long>(chosen.size())};
    SOF_CHECK_MPI(MPI_Bcast(head, 2, MPI_LONG_LONG, 0, world.comm()));
    chosen.resize(static_cast<size_t>(head[1]));
    SOF_CHECK_MPI(MPI_Bcast(chosen.data(), static_cast<int>(head[1]), MPI_CHAR, 0, world.comm()));
    if (head[0] >= 0) core::throw_error(static_cast<core::ErrorKind>(head[0]), chosen);
    std::error_code ec;
    const int missing = !chosen.empty() && !fs::is_directory(chosen, ec) ? 1 : 0;
    std::vector<int> all(static_cast<size_t>(world.size()));
    SOF_CHECK_MPI(MPI_Allgather(&missing, 1, MPI_INT, all.data(), 1, MPI_INT, world.comm()));
    std::string blind;
    for (size_t r = 0; r < all.size(); r++)
        if (all[r]) blind += (blind.empty() ? "" : ", ") + std::to_string(r);
    if (!blind.empty())
        SOF_FAIL(Config,
                 "train.resume = auto: rank 0 chose %s as the newest checkpoint in "
                 "train.checkpoint_dir = %s, but rank(s) %s do not see that directory; every rank "
                 "must see the same train.checkpoint_dir (one file system shared by all nodes, "
                 "and the same working directory for a relative path)",
                 chosen.c_str(), root.c_str(), blind.c_str());
    return chosen;
}

// Every rank reads the elements of its own shard from the checkpoint's shards, whatever rank
// count wrote it (resharding is an exact copy of the state).
// Native state (bf16 master, q8 moments) resumes as it was saved when the formats and the shard
// count are the run's (bitwise); otherwise the checkpoint's state is read as fp32 values
// (exact for fp32 state, converted for native state) and stored in the run's formats, which a
// native checkpoint allows only with train.resume_convert_state.
void Trainer::Impl::resume_from(const std::string& dir) {
    ckpt::Manifest m;
    ckpt::State s;
    const model::ParamLayout& layout = model->layout();
    zero::ShardState st;
    st.map = shard_map();
    const ckpt::Manifest head = ckpt::load_manifest(dir);
    for (const ckpt::DeckChange& c : ckpt::check_resume(dir, head, cfg, mcfg, data_id))
        log.info("resume: %s changed: %s -> %s", c.key.c_str(), c.saved.c_str(), c.now.c_str());
    const offload::StateFormat now = updater->state_format();
    const bool as_kept =
        head.state.native() && head.state == now && head.world_size == st.map.shards;
    if (head.state.native() && !as_kept && !cfg.train.resume_convert_state)
        SOF_FAIL(Config,
                 "cannot resume from %s as it is: its optimizer state (%s, %d shard(s)) is kept "
                 "in a native format and this run keeps %s on %d shard(s); set "
                 "train.resume_convert_state: true to convert it (through fp32 values: q8 codes "
                 "re-quantized on the new blocks), or resume with %d rank(s)",
                 dir.c_str(), head.state.name().c_str(), head.world_size, now.name().c_str(),
                 st.map.shards, head.world_size);
    if (as_kept) {
        ckpt::load_shard_raw(dir, st.map.rank, &m, &s);
        st.native_valid = true;
        st.native.format = now;
        st.native.params = std::move(s.raw[0]);
        st.native.slot[0] = std::move(s.raw[1]);
        st.native.slot[1] = std::move(s.raw[2]);
        st.native.opt_step = m.opt_step;
    } else {
        ckpt::load_resharded(dir, layout, st.map, &m, &s);
        st.params = std::move(s.params);
        st.exp_avg = std::move(s.exp_avg);
        st.exp_avg_sq = std::move(s.exp_avg_sq);
    }
    st.opt_step = m.opt_step;
    if (shards)
        shards->set_shard(st);
    else if (as_kept)
        updater->set_native(st.native);
    else
        updater->set_state(st.params.data(), st.exp_avg.data(), st.exp_avg_sq.data(), m.opt_step);
    train_data->restore(m.train_data);
    skips0 = m.skips; // the counters go on across resumes (the manifest holds the totals)
    rollbacks0 = m.rollbacks;
    step = m.step;
    log.info(
        "resume: %s (step %lld, optimizer step %lld%s)", dir.c_str(),
        static_cast<long long>(m.step), static_cast<long long>(m.opt_step),
        m.world_size != st.map.shards
            ? core::strfmt(", written as %d shard(s), resharded to %d", m.world_size, st.map.shards)
                  .c_str()
            : "");
}

// Sharded save (ckpt::save): rank 0 prepares the temporary directory, every rank holding a shard
// writes it, rank 0 commits (manifest, fsync, rename); a failure on any rank removes the partial
// directory and fails the save everywhere. ZeRO-3 writes one shard per rank; replicated state
// (one rank, or ZeRO-0) one shard, by rank 0. Returns the step directory on every rank.
// collective: all ranks of world
std::string Trainer::Impl::save_checkpoint() {
    const model::ParamLayout& layout = model->layout();
    zero::ShardState st;
    const offload::StateFormat fmt = updater->state_format();
    if (shards) {
        shards->get_shard(&st);
    } else if (fmt.native()) { // the state as kept
        st.map = zero::make_shard_map(layout, 1, 0);
        st.native_valid = true;
        updater->get_native(&st.native);
        st.opt_step = st.native.opt_step;
    } else {
        st.map = zero::make_shard_map(layout, 1, 0);
        st.params.resize(layout.num_params);
        st.exp_avg.resize(layout.num_params);
        st.exp_avg_sq.resize(layout.num_params);
        updater->get_state(st.params.data(), st.exp_avg.data(), st.exp_avg_sq.data(), &st.opt_step);
    }
    ckpt::Manifest m;
    m.step = step;
    m.opt_step = st.opt_step;
    m.model = mcfg;
    m.num_params = static_cast<int64_t>(layout.num_params);
    m.world_size = st.map.shards;
    m.deck_yaml = config::effective_yaml(cfg);
    m.train_data = train_data->state();
    m.skips = skips0 + updater->stats().skips;
    m.rollbacks = rollbacks0 + updater->stats().rollbacks;
    m.data_identity = data_id;
    m.state = fmt;
    ckpt::State s;
    if (st.native_valid) {
        s.raw[0] = std::move(st.native.params);
        s.raw[1] = std::move(st.native.slot[0]);
        s.raw[2] = std::move(st.native.slot[1]);
    } else {
        s.params = std::move(st.params);
        s.exp_avg = std::move(st.exp_avg);
        s.exp_avg_sq = std::move(st.exp_avg_sq);
    }
    comm::Group& all = ctx->all();
    const ckpt::SaveSync sync{[&all] { all.barrier(); }, [&all](bool b) { return all.any(b); }};
    const int r = world.rank();
    return ckpt::save(cfg.train.checkpoint_dir, m, r < st.map.shards ? &s : nullptr,
                      cfg.train.keep_checkpoints, r, world.size(), sync);
}

// One file for the job: every rank's events as its own process (pid = rank), on a common clock.
// collective: all ranks of world
void Trainer::Impl::write_trace() {
    if (world.size() == 1) {
        trace->write(cfg.runtime.trace);
        return;
    }
    std::vector<double> origins = ctx->all().allgather_value(trace->origin_unix_us());
    const double t0 = *std::min_element(origins.begin(), origins.end());
    std::string mine = trace->events_json(world.rank(), core::strfmt("rank %d", world.rank()),
                                          trace->origin_unix_us() - t0);
    int len = static_cast<int>(mine.size());
    std::vector<int> lens(static_cast<size_t>(world.size())), displs(lens.size(), 0);
    SOF_CHECK_MPI(MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, world.comm()));
    std::string all;
    if (world.rank() == 0) {
        for (size_t r = 1; r < lens.size(); r++)
            displs[r] = displs[r - 1] + lens[r - 1];
        all.resize(static_cast<size_t>(displs.back() + lens.back()));
    }
    SOF_CHECK_MPI(MPI_Gatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), displs.data(),
                              MPI_CHAR, 0, world.comm()));
    if (world.rank() != 0) return;
    std::vector<std::string> parts;
    for (size_t r = 0; r < lens.size(); r++)
        parts.push_back(all.substr(static_cast<size_t>(displs[r]), static_cast<size_t>(lens[r])));
    core::Trace::write_parts(cfg.runtime.trace, parts);
}

void Trainer::load_weights(const std::string& step_dir) {
    Impl& s = *impl_;
    ckpt::Manifest m;
    ckpt::State st;
    zero::ShardState sh;
    sh.map = s.shard_map();
    ckpt::load_resharded(step_dir, s.model->layout(), sh.map, &m, &st, /*with_moments=*/false);
    if (!(m.model.arch == s.mcfg.arch && m.model.num_layers == s.mcfg.num_layers &&
          m.model.channels == s.mcfg.channels && m.model.vocab_size == s.mcfg.vocab_size &&
          m.model.padded_vocab_size == s.mcfg.padded_vocab_size))
        SOF_FAIL(Config, "checkpoint %s holds another architecture than this run's model",
                 step_dir.c_str());
    sh.params = std::move(st.params);
    sh.exp_avg.assign(sh.params.size(), 0.0f);
    sh.exp_avg_sq.assign(sh.params.size(), 0.0f);
    if (s.shards)
        s.shards->set_shard(sh);
    else
        s.updater->set_state(sh.params.data(), sh.exp_avg.data(), sh.exp_avg_sq.data(), 0);
    s.log.info("eval: weights of %s (step %lld)", step_dir.c_str(), static_cast<long long>(m.step));
}

} // namespace sof::train
