// Next-token sampling and the generation loop over Model::decode (see sample.h).
#include "model/sample.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

#include "core/error.h"

namespace sof::model {

int sample_token(const float* logits, int V, const SamplingParams& p, std::mt19937_64& rng) {
    if (V <= 0) SOF_FAIL(Internal, "sample_token: V = %d", V);
    if (p.temperature <= 0.0f)
        return static_cast<int>(std::max_element(logits, logits + V) - logits);
    // ids by descending logit (ties: lower id first); scaled logits in double
    std::vector<int> order(static_cast<size_t>(V));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [logits](int a, int b) { return logits[a] > logits[b]; });
    size_t keep = order.size();
    if (p.top_k > 0 && static_cast<size_t>(p.top_k) < keep) {
        // ties with the k-th logit stay, as a threshold filter keeps them
        const float kth = logits[order[static_cast<size_t>(p.top_k) - 1]];
        keep = static_cast<size_t>(p.top_k);
        while (keep < order.size() && logits[order[keep]] == kth)
            keep++;
    }
    const double inv_t = 1.0 / p.temperature, top = logits[order[0]] * inv_t;
    std::vector<double> prob(keep);
    double sum = 0;
    for (size_t i = 0; i < keep; i++)
        sum += prob[i] = std::exp(logits[order[i]] * inv_t - top);
    if (p.top_p < 1.0f) { // the smallest prefix whose mass reaches top_p (at least one)
        double mass = 0;
        size_t n = 0;
        while (n < keep && (n == 0 || mass < p.top_p * sum))
            mass += prob[n++];
        keep = n;
        sum = mass;
    }
    const double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng) * sum;
    double acc = 0;
    for (size_t i = 0; i < keep; i++) {
        acc += prob[i];
        if (u < acc) return order[i];
    }
    return order[keep - 1];
}

GenerateResult generate(Model& model, WeightSource& w, const std::vector<int>& prompt, int max_new,
                        int max_T, const SamplingParams& p, uint64_t seed,
                        const std::vector<int>& stop) {
    using Clock = std::chrono::steady_clock;
    const int n = static_cast<int>(prompt.size());
    if (n < 1) SOF_FAIL(Usage, "generate: the prompt has no tokens");
    if (n >= max_T)
        SOF_FAIL(Usage,
                 "generate: the prompt has %d tokens, the model's context %d; shorten the prompt",
                 n, max_T);
    const int V = model.config().vocab_size, Vp = model.config().padded_vocab_size;
    std::mt19937_64 rng(seed);
    GenerateResult r;
    auto t0 = Clock::now();
    model.decode(w, prompt.data(), n, 0);
    r.prefill_s = std::chrono::duration<double>(Clock::now() - t0).count();
    t0 = Clock::now();
    int pos = n;
    for (int i = 0; i < max_new; i++) {
        const std::vector<float> lg = model.logits();
        const size_t last = lg.size() / static_cast<size_t>(Vp) - 1; // the last row's logits
        const int tok = sample_token(lg.data() + last * Vp, V, p, rng);
        r.ids.push_back(tok);
        if (std::find(stop.begin(), stop.end(), tok) != stop.end()) {
            r.stopped = true;
            break;
        }
        if (i + 1 == max_new || pos >= max_T) break;
        model.decode(w, &tok, 1, pos++);
    }
    r.decode_s = std::chrono::duration<double>(Clock::now() - t0).count();
    return r;
}

} // namespace sof::model
