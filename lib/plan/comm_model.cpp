// Collective volume model (see comm_model.h): the byte counts of zero/ and sp/ as formulas over
// the shard map, checked against the measured counters by tests/mpi.
#include "plan/comm_model.h"

#include "core/strfmt.h"
#include "zero/shard.h"

namespace sof::plan {

CommVolume comm_per_step(const model::ParamLayout& layout, int world, int sp, int zero_stage, int B,
                         int T, int grad_accum, bool recompute, int gather_bytes) {
    CommVolume v;
    if (world <= 1) return v;
    const double N = world, f = 4.0; // fp32 bytes
    const int last = layout.num_units() - 1;
    if (zero_stage == 3) {
        zero::ShardMap m = zero::make_shard_map(layout, world, 0);
        double fwd = 0, bwd = 0;
        for (int u = 0; u <= last; u++) {
            double s = static_cast<double>(m.slice[static_cast<size_t>(u)]);
            fwd += (N - 1) * s;
            if (u != 0 && u != last) bwd += (N - 1) * s;
        }
        v.allgather = (fwd + bwd) * gather_bytes * grad_accum;
        v.reduce_scatter = fwd * f * grad_accum;
    } else {
        for (int u = 0; u <= last; u++) {
            double n = static_cast<double>(layout.unit_begin[static_cast<size_t>(u) + 1] -
                                           layout.unit_begin[static_cast<size_t>(u)]);
            double chunk = static_cast<double>(static_cast<long long>((n + N - 1) / N));
            v.allreduce += 2 * (N - 1) * chunk * f;
        }
    }
    if (sp > 1) {
        // per layer and direction: q, k, v to head-parallel and the attention output back;
        // GPT-2 moves 3C + C, GQA moves NH*hd + 2*NKV*hd + NH*hd
        const double P = sp, L = layout.cfg.num_layers;
        const double W = 2.0 * layout.cfg.q_dim() + 2.0 * layout.cfg.kv_dim();
        const double per_layer = (P - 1) * B * (T / P) * (W / P) * f; // one direction
        // forward and backward of every block; recompute runs the forward of all blocks but the
        // last again (the last block's activations are still there when backward starts)
        v.alltoall = per_layer * (2.0 * L + (recompute ? L - 1.0 : 0.0)) * grad_accum;
    }
    return v;
}

std::string describe_comm(const CommVolume& v, int world, int sp, int zero_stage) {
    if (world <= 1) return "communication: none (1 rank)\n";
    // one decimal unit for the whole line, by the total: MB, GB or TB
    const double t = v.total();
    const double div = t >= 1e12 ? 1e12 : t >= 1e9 ? 1e9 : 1e6;
    const char* u = t >= 1e12 ? "TB" : t >= 1e9 ? "GB" : "MB";
    return core::strfmt("communication per rank per step (%d ranks, ZeRO-%d, sp %d): allgather "
                        "%.3f %s, reduce-scatter %.3f %s, allreduce %.3f %s, all-to-all %.3f %s, "
                        "total %.3f %s sent (and received)\n",
                        world, zero_stage, sp, v.allgather / div, u, v.reduce_scatter / div, u,
                        v.allreduce / div, u, v.alltoall / div, u, t / div, u);
}

} // namespace sof::plan
