// Shared forward/backward scaffolding of the architectures (see unit_loop.h).
// The loops only order acquire/release/unit_done; the math stays in each architecture.
#include "model/unit_loop.h"

#include "core/error.h"

namespace sof::model::detail {

void check_tokens(const char* who, const int* inputs, const int* targets, int N, int V) {
    for (int i = 0; i < N; i++) {
        if (inputs[i] < 0 || inputs[i] >= V)
            SOF_FAIL(Runtime, "%s forward: input token %d at position %d is outside [0, %d)", who,
                     inputs[i], i, V);
        // -1: an ignored target (a masked position, see unit_loop.h)
        if (targets && targets[i] != -1 && (targets[i] < 0 || targets[i] >= V))
            SOF_FAIL(Runtime,
                     "%s forward: target token %d at position %d is outside [0, %d) and not -1 "
                     "(ignored)",
                     who, targets[i], i, V);
    }
}

void forward_blocks(WeightSource& w, int L, const std::function<void(int, const float*)>& block) {
    for (int l = 0; l < L; l++) {
        const float* p = w.acquire(1 + l, Pass::Forward);
        block(l, p);
        w.release(1 + l, Pass::Forward);
    }
}

void backward_blocks(WeightSource& w, GradSink& sink, int L,
                     const std::function<bool(int)>& needs_recompute,
                     const std::function<void(int, const float*)>& recompute,
                     const std::function<void(int, const float*, float*)>& block) {
    for (int l = L - 1; l >= 0; l--) {
        const float* p = w.acquire(1 + l, Pass::Backward);
        if (needs_recompute(l)) recompute(l, p);
        block(l, p, sink.grads(1 + l));
        w.release(1 + l, Pass::Backward);
        sink.unit_done(1 + l);
    }
}

float mean_loss(const float* losses, const int* targets, int N) {
    double sum = 0.0;
    int counted = 0;
    for (int i = 0; i < N; i++) {
        if (targets && targets[i] == -1) continue; // ignored target (unit_loop.h)
        sum += losses[i];
        counted++;
    }
    return counted > 0 ? static_cast<float>(sum / counted) : 0.0f;
}

} // namespace sof::model::detail
