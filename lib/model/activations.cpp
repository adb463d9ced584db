// The activation buffer list of the transformer driver (activations.h): sizes from the block
// spec and the micro-batch shape. The driver and the planner both read it.
#include "model/activations.h"

#include "core/strfmt.h"

namespace sof::model {

std::vector<ActBuffer> activation_buffers(const BlockSpec& s, const ActShape& a) {
    std::vector<ActBuffer> v;
    const size_t BT = static_cast<size_t>(a.B) * a.T, act = static_cast<size_t>(a.act_bytes);
    const size_t C = s.C, Q = s.Q, KV = s.KV, W = s.W, I = s.I, Vp = s.Vp;
    const size_t F = s.fc_rows(), NH = s.NH, NKV = s.NKV;
    const bool ln = s.norm == NormKind::LayerNorm, sp = a.P > 1;
    auto add = [&v](Act id, int set, const char* name, size_t bytes) {
        v.push_back({id, set, set < 0 ? name : core::strfmt("%s[%d]", name, set), bytes});
    };
    add(Act::Tokens, -1, "tokens", BT * 4);
    add(Act::Targets, -1, "targets", BT * 4);
    add(Act::Positions, -1, "positions", BT * 4);
    add(Act::Segments, -1, "segments", BT * static_cast<size_t>(a.P) * 4);
    if (s.pos == PosKind::Rope) {
        const size_t npos = static_cast<size_t>(a.P) * a.T * static_cast<size_t>(s.hd / 2);
        add(Act::RopeCos, -1, "rope cos", npos * 4);
        add(Act::RopeSin, -1, "rope sin", npos * 4);
    }
    add(Act::Res, -1, "residual stream", (static_cast<size_t>(s.L) + 1) * BT * C * act);
    add(Act::Lnf, -1, "lnf", BT * C * act);
    if (ln) add(Act::LnfMean, -1, "lnf mean", BT * 4);
    add(Act::LnfRstd, -1, "lnf rstd", BT * 4);
    add(Act::Logits, -1, "logits", BT * Vp * act);
    add(Act::XentStats, -1, "xent stats", BT * 2 * 4);
    add(Act::Losses, -1, "losses", BT * 4);
    add(Act::DRes, -1, "dres", BT * C * act);
    add(Act::DLn, -1, "dln", BT * C * act);
    add(Act::DAtty, -1, "datty", BT * Q * act);
    add(Act::DQkv, -1, "dqkv", BT * W * act);
    add(Act::DFc, -1, "dfc", BT * F * act);
    add(Act::DAct, -1, "dact", BT * I * act);
    add(Act::Delta, -1, "attention delta", BT * NH * 4);
    if (sp) {
        add(Act::QLoc, -1, "q rows", BT * Q * act);
        add(Act::KvLoc, -1, "kv rows", BT * 2 * KV * act);
        add(Act::DAttyh, -1, "datty heads", BT * Q * act);
        add(Act::DQh, -1, "dq heads", BT * Q * act);
        add(Act::DKvh, -1, "dkv heads", BT * 2 * KV * act);
    }
    const int sets = a.recompute ? 1 : s.L;
    for (int l = 0; l < sets; l++) {
        add(Act::Ln1, l, "ln1", BT * C * act);
        if (ln) add(Act::Ln1Mean, l, "ln1 mean", BT * 4);
        add(Act::Ln1Rstd, l, "ln1 rstd", BT * 4);
        if (s.qk_norm) {
            add(Act::QkvRaw, l, "qkv raw", BT * W * act);
            add(Act::QRstd, l, "q rstd", BT * NH * 4);
            add(Act::KRstd, l, "k rstd", BT * NKV * 4);
        }
        add(Act::Qkv, l, "qkv", BT * W * act);
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
        add(Act::FcPre, l, "fc pre", BT * F * act);
        add(Act::FcAct, l, "fc act", BT * I * act);
    }
    return v;
}

double activation_bytes(const BlockSpec& s, const ActShape& a, size_t round_to) {
    double sum = 0.0;
    for (const ActBuffer& b : activation_buffers(s, a)) {
        const size_t r = b.bytes == 0 ? round_to : (b.bytes + round_to - 1) / round_to * round_to;
        sum += static_cast<double>(r);
    }
    return sum;
}

} // namespace sof::model
