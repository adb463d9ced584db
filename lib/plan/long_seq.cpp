// Long sequences in the planner (long_seq.h): the deck's activation shape, the driver's buffer
// list summed by side, checkpoint link traffic and the backward work that tiling adds.
#include "plan/long_seq.h"

#include <algorithm>
#include <cmath>

#include "core/strfmt.h"
#include "device/device.h"
#include "model/block_spec.h"
#include "offload/memory_plan.h"

namespace sof::plan {

model::ActShape activation_shape(const config::Config& cfg, double act_bytes) {
    const int sp = std::max(1, cfg.parallel.sp);
    model::ActShape a;
    a.B = cfg.train.batch_size;
    a.T = cfg.train.seq_len / sp;
    a.P = sp;
    a.recompute = cfg.model.recompute;
    a.act_bytes = static_cast<int>(act_bytes);
    a.loss_tile = cfg.model.loss_tile;
    a.mlp_tile = cfg.model.mlp_tile;
    a.offload = cfg.model.offload_checkpoints && cfg.model.recompute;
    a.device_ckpt = cfg.model.device_checkpoints;
    return a;
}

ActivationEstimate activation_estimate(const model::ArchConfig& m, double batch, double seq_len,
                                       double sp, double eb, bool recompute) {
    model::ActShape shape;
    shape.B = static_cast<int>(batch);
    shape.T = static_cast<int>(seq_len / sp);
    shape.P = static_cast<int>(sp);
    shape.recompute = recompute;
    shape.act_bytes = static_cast<int>(eb);
    return activation_estimate(m, shape);
}

ActivationEstimate activation_estimate(const model::ArchConfig& m, const model::ActShape& shape) {
    // the driver's own buffer list (model/activations.h), each rounded as the device rounds it
    const model::BlockSpec spec = model::block_spec(m);
    ActivationEstimate a;
    for (const model::ActBuffer& b : model::activation_buffers(spec, shape)) {
        const double r = static_cast<double>(offload::mem_round(b.bytes));
        if (b.host) {
            a.host += r;
            continue;
        }
        a.total += r;
        if (b.set == 0) a.per_layer += r;
        if (b.set >= 0) a.blocks += r;
        if (b.id == model::Act::Res) a.layer_inputs += r, a.blocks += r;
        if (b.id == model::Act::Logits) a.logits += r;
    }
    a.head = a.total - a.blocks - a.logits;
    return a;
}

LongSeqCost long_seq_cost(const model::ArchConfig& m, const model::ActShape& a,
                          const HardwareProfile& hw, double fwd_s, double bwd_s) {
    LongSeqCost c;
    const model::BlockSpec s = model::block_spec(m);
    const double BT = static_cast<double>(a.B) * a.T;
    c.host_bytes = model::activation_bytes(s, a, offload::kMemAlign, true);
    const int moved = a.offload && a.recompute ? s.L - 1 - model::kept_checkpoints(a, s.L) : 0;
    if (moved > 0) {
        const double one = BT * s.C * a.act_bytes, n = moved;
        const double out = transfer_seconds(hw.d2h, one), back = transfer_seconds(hw.h2d, one);
        c.ckpt_bytes = 2 * n * one;
        c.ckpt_link_s = n * (out + back);
        c.ckpt_fwd_exposed_s = n * std::max(0.0, out - fwd_s / s.L);
        c.ckpt_bwd_exposed_s = n * std::max(0.0, back - bwd_s / s.L);
    }
    const double RL = model::loss_rows(a);
    if (RL < BT) { // every tile but the last one: its logits are still there from the forward
        const double last = BT - RL * (std::ceil(BT / RL) - 1);
        c.extra_bwd_flops += 2.0 * (BT - last) * static_cast<double>(s.Vp) * s.C;
    }
    if (model::mlp_tiled(a) && !a.recompute)
        c.extra_bwd_flops += 2.0 * BT * static_cast<double>(s.fc_rows()) * s.C * s.L;
    // FlashAttention's backward computes the scores again: five T x T products against the
    // forward's two, half a forward more than the 2x-forward rule of the other matrices
    const double T = static_cast<double>(a.T) * a.P;
    double pairs = 0.0; // over the layers, each with its window (block_spec.h)
    for (int w : s.window)
        pairs += model::attention_pairs(T, w);
    c.extra_bwd_flops += 0.5 * 4.0 * a.B * pairs * s.Q / a.P;
    return c;
}

std::string long_seq_note(const config::Config& cfg, const model::ArchConfig& m,
                          const LongSeqCost& ls, int grad_accum) {
    const model::ActShape a = activation_shape(cfg, 4.0);
    const int BT = a.B * a.T, rl = model::loss_rows(a), rm = model::mlp_rows(a);
    std::string s;
    if (rl < BT) s += core::strfmt("LM head + loss in tiles of %d of the %d tokens", rl, BT);
    if (rm < BT) s += core::strfmt("%sMLP in tiles of %d tokens", s.empty() ? "" : ", ", rm);
    const int moved = a.offload ? m.num_layers - 1 - model::kept_checkpoints(a, m.num_layers) : 0;
    if (moved > 0)
        s += core::strfmt("%s%d block inputs offloaded to host memory (%s pinned), %.3f s over "
                          "the CPU-GPU link per step, %.3f s of it not hidden behind the blocks",
                          s.empty() ? "" : "; ", moved, device::format_bytes(ls.host_bytes).c_str(),
                          grad_accum * ls.ckpt_link_s,
                          grad_accum * (ls.ckpt_fwd_exposed_s + ls.ckpt_bwd_exposed_s));
    return s.empty() ? s : "long sequence: " + s;
}

double forward_flops(const model::ArchConfig& m, double active_block_params, double batch,
                     double seq_len, double sp) {
    const double tokens = batch * seq_len / sp;
    double pairs = 0.0; // causal query-key pairs of a sequence, over the layers' windows
    for (int w : model::block_spec(m).window)
        pairs += model::attention_pairs(seq_len, w);
    return 2.0 * tokens *
               (active_block_params + static_cast<double>(m.padded_vocab_size) * m.channels) +
           4.0 * batch * pairs * m.q_dim() / sp;
}

} // namespace sof::plan
