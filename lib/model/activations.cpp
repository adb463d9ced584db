// The activation buffer list of the transformer driver (activations.h): sizes from the block
// spec and the micro-batch shape. The driver and the planner both read it.
#include "model/activations.h"

#include <algorithm>

#include "core/strfmt.h"

namespace sof::model {

namespace {

int tile_rows(int request, int BT, bool auto_tiles) {
    if (request > 0) return std::min(request, BT);
    if (request == kTileAuto && auto_tiles && BT > kAutoTileRows) return kAutoTileRows;
    return BT; // off, or auto at a short B*T
}

} // namespace

int loss_rows(const ActShape& a) {
    return tile_rows(a.loss_tile, a.B * a.T, true);
}

int mlp_rows(const ActShape& a) {
    return tile_rows(a.mlp_tile, a.B * a.T, a.recompute);
}

Act shared_buffer(const BlockSpec& s, const ActShape& a, Act id) {
    if (a.P <= 1) return Act::kCount;
    const int Q = s.Q, KV2 = 2 * s.KV, C = s.C;
    switch (id) {
    case Act::Qkv:
        return Act::DQkv;
    case Act::QLoc:
        return Act::DAtty;
    case Act::DAttyh:
        return a.recompute && Q <= C ? Act::Res2 : Act::kCount;
    case Act::DQh:
        return a.recompute ? Act::Atty : Act::kCount;
    case Act::DKvh:
        return a.recompute && KV2 <= C ? Act::DLn : Act::kCount;
    case Act::XRecv:
        return a.recompute && std::max(Q, KV2) <= C ? Act::Ln2 : Act::kCount;
    default:
        return Act::kCount;
    }
}

std::vector<ActBuffer> activation_buffers(const BlockSpec& s, const ActShape& a) {
    std::vector<ActBuffer> v;
    const size_t BT = static_cast<size_t>(a.B) * a.T, act = static_cast<size_t>(a.act_bytes);
    const size_t C = s.C, Q = s.Q, KV = s.KV, W = s.W, I = s.I, Vp = s.Vp;
    const size_t F = s.fc_rows(), NH = s.NH, NKV = s.NKV;
    const bool ln = s.norm == NormKind::LayerNorm, sp = a.P > 1;
    const size_t RL = static_cast<size_t>(loss_rows(a)), RM = static_cast<size_t>(mlp_rows(a));
    const bool tiled_mlp = RM < BT, offload = a.offload && a.recompute;
    auto add = [&v, &s, &a](Act id, int set, const char* name, size_t bytes, bool host = false) {
        if (shared_buffer(s, a, id) != Act::kCount) return; // in another buffer's memory
        v.push_back({id, set, set < 0 ? name : core::strfmt("%s[%d]", name, set), bytes, host});
    };
    add(Act::Tokens, -1, "tokens", BT * 4);
    add(Act::Targets, -1, "targets", BT * 4);
    add(Act::Positions, -1, "positions", BT * 4);
    add(Act::Segments, -1, "segments", BT * static_cast<size_t>(a.P) * 4);
    if (s.pos == PosKind::Rope) { // rows: this slice's positions (unpacked) or each token's own
        const size_t npos = BT * static_cast<size_t>(s.hd / 2);
        add(Act::RopeCos, -1, "rope cos", npos * 4);
        add(Act::RopeSin, -1, "rope sin", npos * 4);
    }
    if (offload) { // K kept + two rotating device slots; the other inputs wait in host memory
        const size_t kept = static_cast<size_t>(kept_checkpoints(a, s.L));
        const size_t host = static_cast<size_t>(std::max(0, s.L - 1)) - kept;
        add(Act::Res, -1, "residual stream slots", (kept + 2) * BT * C * act);
        if (host > 0) add(Act::ResHost, -1, "checkpoints (host)", host * BT * C * act, true);
    } else {
        add(Act::Res, -1, "residual stream", (static_cast<size_t>(s.L) + 1) * BT * C * act);
    }
    add(Act::Lnf, -1, RL < BT ? "lnf tile" : "lnf", RL * C * act);
    if (ln) add(Act::LnfMean, -1, "lnf mean", BT * 4);
    add(Act::LnfRstd, -1, "lnf rstd", BT * 4);
    add(Act::Logits, -1, RL < BT ? "logits tile" : "logits", RL * Vp * act);
    add(Act::XentStats, -1, "xent stats", BT * 2 * 4);
    add(Act::Losses, -1, "losses", BT * 4);
    add(Act::DRes, -1, "dres", BT * C * act);
    add(Act::DLn, -1, "dln", BT * C * act);
    add(Act::DAtty, -1, "datty", BT * Q * act);
    add(Act::DQkv, -1, "dqkv", BT * W * act);
    add(Act::DFc, -1, "dfc", RM * F * act);
    add(Act::DAct, -1, "dact", RM * I * act);
    if (tiled_mlp) { // one tile's MLP buffers, recomputed per tile in backward
        add(Act::FcPre, -1, "fc pre tile", RM * F * act);
        add(Act::FcAct, -1, "fc act tile", RM * I * act);
    }
    add(Act::Delta, -1, "attention delta", BT * NH * 4);
    if (s.sinks && act != 4) add(Act::Sinks, -1, "sinks fp32", NH * 4);
    if (sp) { // q rows: the datty buffer; the rest as shared_buffer says
        add(Act::KvLoc, -1, "kv rows", BT * 2 * KV * act);
        add(Act::DAttyh, -1, "datty heads", BT * Q * act);
        add(Act::DQh, -1, "dq heads", BT * Q * act);
        add(Act::DKvh, -1, "dkv heads", BT * 2 * KV * act);
        add(Act::XRecv, -1, "all-to-all receive", BT * std::max(Q, 2 * KV) * act);
    }
    bool any_sparse = false;
    for (int l = 0; l < s.L; l++)
        any_sparse = any_sparse || s.is_sparse(l);
    const size_t E = static_cast<size_t>(s.E), K = static_cast<size_t>(s.K);
    const size_t IE = static_cast<size_t>(s.IE), P = BT * K;
    if (any_sparse) {
        add(Act::MoeStats, -1, "moe aux stats", (2 * E + 2) * 4);
        add(Act::MoeDys, -1, "moe dys", P * C * act);
        add(Act::MoeDw, -1, "moe dw", P * 4);
        add(Act::MoeDh, -1, "moe dh", P * IE * act);
        add(Act::MoeDgu, -1, "moe dgu", P * 2 * IE * act);
        add(Act::MoeDxs, -1, "moe dxs", P * C * act);
        add(Act::MoeDlogits, -1, "moe dlogits", BT * E * act);
    }
    const int sets = a.recompute ? 1 : s.L;
    for (int l = 0; l < sets; l++) {
        if (a.recompute ? any_sparse : s.is_sparse(l)) {
            add(Act::MoeLogits, l, "moe logits", BT * E * act);
            add(Act::MoeIdx, l, "moe idx", P * 4);
            add(Act::MoeW, l, "moe w", P * 4);
            add(Act::MoeOrder, l, "moe order", P * 4);
            add(Act::MoeSlot, l, "moe slot", P * 4);
            add(Act::MoeOff, l, "moe offsets", (E + 1) * 4);
            add(Act::MoeXs, l, "moe xs", P * C * act);
            add(Act::MoeGu, l, "moe gate_up", P * 2 * IE * act);
            add(Act::MoeH, l, "moe h", P * IE * act);
            add(Act::MoeYs, l, "moe ys", P * C * act);
        }
        add(Act::Ln1, l, "ln1", BT * C * act);
        if (ln) add(Act::Ln1Mean, l, "ln1 mean", BT * 4);
        add(Act::Ln1Rstd, l, "ln1 rstd", BT * 4);
        if (s.qk_norm) {
            add(Act::QkvRaw, l, "qkv raw", BT * W * act);
            add(Act::QRstd, l, "q rstd", BT * NH * 4);
            add(Act::KRstd, l, "k rstd", BT * NKV * 4);
        }
        add(Act::Qkv, l, "qkv", BT * W * act); // Ulysses: the dqkv buffer
        add(Act::Lse, l, "attention lse", BT * NH * 4);
        if (sp) {
            add(Act::Qh, l, "q heads", BT * Q * act);
            add(Act::Kvh, l, "kv heads", BT * 2 * KV * act);
            add(Act::Attyh, l, "attention out heads", BT * Q * act);
        }
        add(Act::Atty, l, "attention out", BT * Q * act);
        add(Act::Res2, l, "res2", BT * C * act);
        add(Act::Ln2, l, "ln2", BT * C * act);
        if (ln) add(Act::Ln2Mean, l, "ln2 mean", BT * 4);
        add(Act::Ln2Rstd, l, "ln2 rstd", BT * 4);
        if (!tiled_mlp && (a.recompute || !s.is_sparse(l))) {
            add(Act::FcPre, l, "fc pre", BT * F * act);
            add(Act::FcAct, l, "fc act", BT * I * act);
        }
    }
    return v;
}

double activation_bytes(const BlockSpec& s, const ActShape& a, size_t round_to, bool host) {
    double sum = 0.0;
    for (const ActBuffer& b : activation_buffers(s, a)) {
        if (b.host != host) continue;
        const size_t r = b.bytes == 0 ? round_to : (b.bytes + round_to - 1) / round_to * round_to;
        sum += static_cast<double>(r);
    }
    return sum;
}

} // namespace sof::model
