// Training/validation batches from llm.c token shards or the built-in Markov corpus, in llm.c's
// sequential order or a seeded shuffled order, striped over ranks, with a resumable position.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "config/config.h"
#include "data/megatron.h"
#include "data/shards.h"

namespace sof::data {

enum class Split { Train, Val };

// A target the loss ignores (a masked position): loss 0, gradient 0, not counted in the mean.
constexpr int kIgnoreTarget = -1;

// Where the loader stands: the position of the NEXT batch plus the geometry that position refers
// to. Positions are indexes, not RNG states: the shuffled orders are pure functions of
// (seed, epoch, shard), so this is all restore() needs. Geometry fields equal to 0 mean
// "unknown" and are not checked by restore() (a default-constructed state means "the start").
struct LoaderState {
    int64_t epoch = 0;  // completed passes over all shards
    int64_t shard = 0;  // index into this epoch's shard order
    int64_t sample = 0; // index into this shard's batch order
    // geometry
    int64_t num_shards = 0;
    int64_t num_tokens = 0;   // all shards together
    int64_t batch_tokens = 0; // B*T per rank
    int64_t world = 0;        // ranks striding over the data
    int64_t accum = 0;        // micro-batches per optimizer step (0 in states of older versions:
                              // read as 1)
    int64_t shuffle = 0;      // 1 = shuffled order
    uint64_t seed = 0;        // shuffle seed (0 when not shuffled)

    // One line, e.g. "v1 epoch=0 shard=1 sample=17 shards=3 tokens=30000 bt=64 world=1
    // shuffle=1 seed=1337 accum=2" (accum may be absent: 1). from_string throws core::Error
    // (Format) naming what is wrong.
    std::string to_string() const;
    static LoaderState from_string(const std::string& s);
    bool operator==(const LoaderState&) const = default;
};

class MarkovChain;

class DataLoader {
  public:
    // cfg.train / cfg.val: "builtin", or what config::find_data_files finds for the value: llm.c
    // shards (uint16 or uint32 per shard, its header says which; "<shard>.mask" is its loss
    // mask) and Megatron-LM indexed datasets (<prefix>.idx + .bin, any integer dtype; each one
    // shard of this loader, its tokens read per batch, never held whole). Every input is
    // validated here (header/index, size, every token id < vocab_size, at least
    // accum*world*B*T+1 tokens), and its loss mask when cfg.loss_mask says to use masks (a
    // Megatron dataset has none). cfg.pack needs cfg.eos_id in [0, vocab_size) for llm.c shards
    // and the built-in corpus (the trainer resolves data.eos_id: -1 first); a Megatron dataset's
    // documents are the ones its index lists. The built-in corpus needs vocab_size <= 65536.
    // The validation split is always sequential. accum: micro-batches per optimizer step: the
    // unit of order (and of shuffling) is the step's global batch of accum*world*B sequences, so
    // the same step reads the same sequences at any (world, accum) with the same product.
    DataLoader(const config::DataConfig& cfg, Split split, int vocab_size, int B, int T, int rank,
               int world, int accum = 1);
    ~DataLoader();
    DataLoader(const DataLoader&) = delete;
    DataLoader& operator=(const DataLoader&) = delete;

    // The next micro-batch: inputs (B*T) and targets (B*T) = the same B*T+1 consecutive tokens
    // shifted by one; with loss masks, a target whose mask byte is 0 is kIgnoreTarget. Micro-batch
    // m of global batch g is read by rank r at token offset g*A*W*B*T + (m*W + r)*B*T (A = accum).
    // Packed (cfg.pack): segments (B*T) gets each row's document ids: an input EOS (cfg.eos_id;
    // in a Megatron dataset: the last token of a document of its index) is the last token of
    // its document, the next input starts a new one (ids 0, 1, ... per row); the target of such
    // an input (the next document's first token) is kIgnoreTarget.
    // segments must be non-null exactly when packed().
    void next(int* inputs, int* targets, int* segments = nullptr);
    // targets may be kIgnoreTarget (loss masks, or packing's boundary targets)
    bool has_masks() const { return masked_ || pack_; }
    bool packed() const { return pack_; }
    void reset(); // back to the first batch of epoch 0
    LoaderState state() const;
    void restore(const LoaderState& s); // Config error if the geometry does not match
    std::string describe() const;       // source, #shards, #tokens, batches per epoch
    double entropy_floor() const;       // nats/token of the built-in corpus; NaN for shards
    int64_t batches_per_epoch() const { return batches_per_epoch_; }

  private:
    struct Shard {
        std::string path;      // "" for the built-in corpus; a Megatron dataset's prefix
        int64_t num_tokens;    // tokens in the shard
        int64_t num_samples;   // batches it yields per epoch: (num_tokens - 1) / (A*W*B*T)
        bool megatron = false; // a Megatron-LM indexed dataset (megatron.h)
    };
    void prepare();                      // make orders and the token buffer match pos_
    void load_megatron(const Shard& sh); // open its .bin (and its document starts if packing)
    void mark_documents(int64_t offset, int* targets, int* segments) const;
    void check_eos(const config::DataConfig& cfg, int vocab_size) const; // data.pack's EOS
    int64_t shard_id(int64_t index) const; // shard at this position of the epoch's order

    std::string source_; // "builtin" or the glob
    std::string key_;    // "data.train" / "data.val"
    int vocab_, B_, T_, rank_, world_, accum_;
    int micro_ = 0; // next micro-batch of the current global batch (0..accum-1)
    bool shuffle_;
    bool masked_ = false;
    bool pack_ = false;
    int eos_ = -1; // document separator when pack_
    uint64_t seed_;
    std::vector<Shard> shards_;
    int64_t num_tokens_ = 0, batches_per_epoch_ = 0;
    std::unique_ptr<MarkovChain> chain_; // built-in corpus only

    LoaderState pos_;                  // next batch (epoch, shard, sample) plus geometry
    std::vector<int64_t> shard_order_; // (num_shards) for order_epoch_
    int64_t order_epoch_ = -1;
    std::vector<int64_t> sample_order_; // (num_samples of the current shard); empty = sequential
    int64_t sample_epoch_ = -1, sample_shard_ = -1;
    ShardTokens tokens_;        // (num_tokens) of loaded_shard_, uint16 or uint32 as stored
    std::vector<uint8_t> mask_; // (num_tokens) of loaded_shard_ when masked_: 1 = counted target
    int64_t loaded_shard_ = -1;
    // a Megatron loaded_shard_: its tokens file, and (packing) where its documents start
    std::unique_ptr<MegatronTokens> megatron_;
    std::vector<int64_t> doc_starts_; // sorted token offsets in (0, num_tokens)
    std::vector<int> window_;         // (B*T + 1) tokens of the batch being read
};

} // namespace sof::data
