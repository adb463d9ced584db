// Generation on a Model: next-token sampling (temperature, top-k, top-p; greedy) and the decode
// loop over the KV cache (Model::decode): prefill the prompt, then one token per call.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "model/model.h"

namespace sof::model {

struct SamplingParams {
    float temperature = 1.0f; // <= 0: greedy (argmax, the lowest id on ties)
    int top_k = 0;            // keep the k most likely tokens (0: all)
    float top_p = 1.0f;       // keep the smallest most-likely set with mass >= top_p (1: all)
};

// The next token from logits (V) (Hugging Face's order: temperature, then top-k, then top-p, then
// a draw from the renormalized softmax with one uniform number of rng).
int sample_token(const float* logits, int V, const SamplingParams& p, std::mt19937_64& rng);

struct GenerateResult {
    std::vector<int> ids; // the new tokens (a stop token included when one ended it)
    double prefill_s = 0; // time of the prompt's forward
    double decode_s = 0;  // time of the one-token steps
    bool stopped = false; // a stop token ended it (else max_new tokens or max_T)
};

// Prompt (>= 1 id) through model.decode in one call, then up to max_new tokens one at a time,
// ending after a token of `stop`; never beyond the model's max_T positions (model built with
// max_T >= prompt.size() + 1). Deterministic in seed.
GenerateResult generate(Model& model, WeightSource& w, const std::vector<int>& prompt, int max_new,
                        int max_T, const SamplingParams& p, uint64_t seed,
                        const std::vector<int>& stop);

} // namespace sof::model
