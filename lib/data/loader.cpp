// DataLoader: llm.c-order and shuffled batches from token shards or the built-in corpus, rank
// striping, resumable positions (LoaderState text form for checkpoints).
#include "data/loader.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <sstream>

#include "config/data_files.h"
#include "core/error.h"
#include "data/builtin.h"
#include "data/masks.h"
#include "data/rng.h"
#include "data/shards.h"

namespace sof::data {

namespace {

// Stream tags for derive_seed (ASCII of a short name).
constexpr uint64_t kTagChain = 0x636861696e;    // "chain"
constexpr uint64_t kTagTrain = 0x747261696e;    // "train"
constexpr uint64_t kTagVal = 0x76616c;          // "val"
constexpr uint64_t kTagShards = 0x736861726473; // "shards"
constexpr uint64_t kTagSamples = 0x73616d706c;  // "sampl"

int64_t parse_int(const std::string& line, const std::string& key, const std::string& text) {
    if (text.empty())
        SOF_FAIL(Format, "loader state '%s': %s has no value", line.c_str(), key.c_str());
    errno = 0;
    char* end = nullptr;
    long long v = std::strtoll(text.c_str(), &end, 10);
    if (errno != 0 || *end != '\0')
        SOF_FAIL(Format, "loader state '%s': %s = '%s' is not an integer", line.c_str(),
                 key.c_str(), text.c_str());
    return v;
}

// inputs = src[0..n), targets = src[1..n]: src holds n+1 consecutive token ids, each < vocab
// (checked when the shard was read), so they fit an int.
template <typename T> void copy_batch(const T* src, int64_t n, int* inputs, int* targets) {
    for (int64_t i = 0; i < n; i++) {
        inputs[i] = static_cast<int>(src[i]);
        targets[i] = static_cast<int>(src[i + 1]);
    }
}

// targets[i] = kIgnoreTarget where the mask of the target token (mask[i + 1]) is 0
void apply_mask(const uint8_t* mask, int64_t n, int* targets) {
    for (int64_t i = 0; i < n; i++)
        if (mask[i + 1] == 0) targets[i] = kIgnoreTarget;
}

} // namespace

std::string LoaderState::to_string() const {
    return core::strfmt("v1 epoch=%lld shard=%lld sample=%lld shards=%lld tokens=%lld bt=%lld "
                        "world=%lld shuffle=%lld seed=%llu accum=%lld",
                        static_cast<long long>(epoch), static_cast<long long>(shard),
                        static_cast<long long>(sample), static_cast<long long>(num_shards),
                        static_cast<long long>(num_tokens), static_cast<long long>(batch_tokens),
                        static_cast<long long>(world), static_cast<long long>(shuffle),
                        static_cast<unsigned long long>(seed), static_cast<long long>(accum));
}

LoaderState LoaderState::from_string(const std::string& s) {
    std::istringstream in(s);
    std::string word;
    if (!(in >> word) || word != "v1")
        SOF_FAIL(Format,
                 "loader state '%s': expected it to start with the version 'v1' (a state "
                 "written by a different superoffload version?)",
                 s.c_str());
    LoaderState st;
    struct Field {
        const char* key;
        int64_t* value;
        bool seen;
    };
    Field fields[] = {{"epoch", &st.epoch, false},       {"shard", &st.shard, false},
                      {"sample", &st.sample, false},     {"shards", &st.num_shards, false},
                      {"tokens", &st.num_tokens, false}, {"bt", &st.batch_tokens, false},
                      {"world", &st.world, false},       {"shuffle", &st.shuffle, false}};
    bool seed_seen = false, accum_seen = false;
    while (in >> word) {
        size_t eq = word.find('=');
        if (eq == std::string::npos)
            SOF_FAIL(Format, "loader state '%s': '%s' is not key=value", s.c_str(), word.c_str());
        std::string key = word.substr(0, eq), val = word.substr(eq + 1);
        if (key == "seed") {
            if (seed_seen) SOF_FAIL(Format, "loader state '%s': seed given twice", s.c_str());
            seed_seen = true;
            errno = 0;
            char* end = nullptr;
            unsigned long long v = std::strtoull(val.c_str(), &end, 10);
            if (val.empty() || val[0] == '-' || errno != 0 || *end != '\0')
                SOF_FAIL(Format, "loader state '%s': seed = '%s' is not an unsigned integer",
                         s.c_str(), val.c_str());
            st.seed = v;
            continue;
        }
        if (key == "accum") { // optional: states of older versions have none (= 1)
            if (accum_seen) SOF_FAIL(Format, "loader state '%s': accum given twice", s.c_str());
            accum_seen = true;
            st.accum = parse_int(s, key, val);
            if (st.accum < 0)
                SOF_FAIL(Format, "loader state '%s': accum = %lld is negative", s.c_str(),
                         static_cast<long long>(st.accum));
            continue;
        }
        bool known = false;
        for (Field& f : fields) {
            if (key != f.key) continue;
            if (f.seen) SOF_FAIL(Format, "loader state '%s': %s given twice", s.c_str(), f.key);
            *f.value = parse_int(s, key, val);
            if (*f.value < 0)
                SOF_FAIL(Format, "loader state '%s': %s = %lld is negative", s.c_str(), f.key,
                         static_cast<long long>(*f.value));
            f.seen = known = true;
        }
        if (!known) SOF_FAIL(Format, "loader state '%s': unknown key '%s'", s.c_str(), key.c_str());
    }
    for (const Field& f : fields)
        if (!f.seen) SOF_FAIL(Format, "loader state '%s': missing key '%s'", s.c_str(), f.key);
    if (!seed_seen) SOF_FAIL(Format, "loader state '%s': missing key 'seed'", s.c_str());
    return st;
}

DataLoader::DataLoader(const config::DataConfig& cfg, Split split, int vocab_size, int B, int T,
                       int rank, int world, int accum)
    : source_(split == Split::Train ? cfg.train : cfg.val),
      key_(split == Split::Train ? "data.train" : "data.val"), vocab_(vocab_size), B_(B), T_(T),
      rank_(rank), world_(world), accum_(accum), shuffle_(split == Split::Train && cfg.shuffle),
      seed_(shuffle_ ? cfg.seed : 0) {
    if (B < 1 || T < 1)
        SOF_FAIL(Config, "data loader: batch_size (%d) and seq_len (%d) must be >= 1", B, T);
    if (world < 1 || rank < 0 || rank >= world)
        SOF_FAIL(Internal, "data loader: rank %d is not in a world of %d ranks", rank, world);
    if (vocab_size < 1)
        SOF_FAIL(Config, "data loader: model.vocab_size = %d; it must be >= 1", vocab_size);
    if (accum < 1)
        SOF_FAIL(Internal, "data loader: %d micro-batches per step; it must be >= 1", accum);
    pack_ = cfg.pack;
    eos_ = cfg.eos_id;
    // tokens per global batch (one optimizer step over all ranks)
    const int64_t stride = static_cast<int64_t>(accum) * world * B * T;
    const std::string batch_text =
        accum > 1 ? core::strfmt("%d micro-batch(es) x batch_size %d x seq_len %d x %d rank(s)",
                                 accum, B, T, world)
                  : core::strfmt("batch_size %d x seq_len %d x %d rank(s)", B, T, world);
    if (source_ == "builtin") {
        const uint64_t bseed = cfg.builtin.seed;
        const int64_t n = split == Split::Train ? cfg.builtin.train_tokens : cfg.builtin.val_tokens;
        const char* nkey = split == Split::Train ? "train_tokens" : "val_tokens";
        if (n < stride + 1)
            SOF_FAIL(Config,
                     "data.builtin.%s = %lld is too small: one batch needs %s + 1 = %lld tokens; "
                     "raise data.builtin.%s",
                     nkey, static_cast<long long>(n), batch_text.c_str(),
                     static_cast<long long>(stride + 1), nkey);
        if (vocab_size > config::kMaxBuiltinVocab)
            SOF_FAIL(Config,
                     "%s = builtin: the built-in corpus stores tokens as uint16, so it needs "
                     "model.vocab_size <= %d, got %d; use a smaller vocabulary or token shards "
                     "(uint32 shards hold any vocabulary: scripts/make_shard.py, docs/data.md)",
                     key_.c_str(), config::kMaxBuiltinVocab, vocab_size);
        check_eos(cfg, vocab_size);
        chain_ = std::make_unique<MarkovChain>(vocab_size, derive_seed(bseed, kTagChain));
        tokens_.token_bytes = 2;
        tokens_.u16.resize(static_cast<size_t>(n));
        chain_->generate(derive_seed(bseed, split == Split::Train ? kTagTrain : kTagVal), n,
                         tokens_.u16.data());
        loaded_shard_ = 0;
        shards_.push_back({"", n, (n - 1) / stride});
    } else {
        const std::vector<config::DataFile> files = config::find_data_files(source_, key_);
        std::vector<std::string> with_mask, without_mask, megatron;
        for (const config::DataFile& f : files) {
            std::error_code ec;
            if (f.megatron)
                megatron.push_back(f.path);
            else
                (std::filesystem::exists(mask_path(f.path), ec) ? with_mask : without_mask)
                    .push_back(f.path);
        }
        if (cfg.loss_mask == "require" && !megatron.empty())
            SOF_FAIL(Config,
                     "data.loss_mask = require but %s names the Megatron-LM dataset %s, whose "
                     "format has no loss masks; set data.loss_mask: auto (or ignore), or give "
                     "token shards with masks (scripts/prepare_data.py on chat data)",
                     key_.c_str(), megatron[0].c_str());
        if (cfg.loss_mask == "require" && !without_mask.empty())
            SOF_FAIL(Config,
                     "data.loss_mask = require but token shard %s (%s) has no loss mask %s (%zu of "
                     "%zu shards have none); write shards with masks (scripts/prepare_data.py "
                     "--chat) or set data.loss_mask: ignore",
                     without_mask[0].c_str(), key_.c_str(), mask_path(without_mask[0]).c_str(),
                     without_mask.size(), files.size());
        if (cfg.loss_mask == "auto" && !with_mask.empty() &&
            (!without_mask.empty() || !megatron.empty()))
            SOF_FAIL(
                Config,
                "%s: %zu token shard(s) have a loss mask (e.g. %s) and %zu have none (e.g. "
                "%s): with data.loss_mask = auto either all shards of a split have one or "
                "none; re-create the data, or set data.loss_mask: ignore to train on every target",
                key_.c_str(), with_mask.size(), mask_path(with_mask[0]).c_str(),
                without_mask.size() + megatron.size(),
                (without_mask.empty() ? megatron[0] + " (a Megatron dataset)" : without_mask[0])
                    .c_str());
        masked_ = cfg.loss_mask != "ignore" && !with_mask.empty();
        if (files.size() > megatron.size()) check_eos(cfg, vocab_size); // llm.c shards: EOS
        for (const config::DataFile& f : files) {
            int64_t n = 0;
            if (f.megatron) {
                const MegatronInfo info = read_megatron_index(f.path, nullptr);
                check_megatron_tokens(info, vocab_size);
                n = info.num_tokens;
            } else {
                n = read_shard(f.path, vocab_size, nullptr).num_tokens;
            }
            if (n < stride + 1)
                SOF_FAIL(Config,
                         "%s %s (%s) has %lld tokens but one batch needs %s + 1 = %lld; "
                         "use %s or a smaller batch_size/seq_len",
                         f.megatron ? "Megatron dataset" : "token shard", f.path.c_str(),
                         key_.c_str(), static_cast<long long>(n), batch_text.c_str(),
                         static_cast<long long>(stride + 1),
                         f.megatron ? "more data" : "larger shards");
            if (masked_) read_mask(mask_path(f.path), n, nullptr);
            shards_.push_back({f.path, n, (n - 1) / stride, f.megatron});
        }
    }
    for (const Shard& s : shards_) {
        num_tokens_ += s.num_tokens;
        batches_per_epoch_ += s.num_samples;
    }
    pos_.num_shards = static_cast<int64_t>(shards_.size());
    pos_.num_tokens = num_tokens_;
    pos_.batch_tokens = static_cast<int64_t>(B) * T;
    pos_.world = world;
    pos_.accum = accum;
    pos_.shuffle = shuffle_ ? 1 : 0;
    pos_.seed = seed_;
    prepare();
}

DataLoader::~DataLoader() = default;

int64_t DataLoader::shard_id(int64_t index) const {
    return shuffle_ ? shard_order_[static_cast<size_t>(index)] : index;
}

void DataLoader::prepare() {
    if (shuffle_ && order_epoch_ != pos_.epoch) {
        shard_order_ = permutation(pos_.num_shards, derive_seed(seed_, kTagShards, pos_.epoch));
        order_epoch_ = pos_.epoch;
    }
    const int64_t id = shard_id(pos_.shard);
    if (shuffle_ && (sample_epoch_ != pos_.epoch || sample_shard_ != id)) {
        const uint64_t s =
            derive_seed(derive_seed(seed_, kTagSamples, pos_.epoch), kTagSamples, id);
        sample_order_ = permutation(shards_[static_cast<size_t>(id)].num_samples, s);
        sample_epoch_ = pos_.epoch;
        sample_shard_ = id;
    }
    if (loaded_shard_ != id && shards_[static_cast<size_t>(id)].megatron) {
        load_megatron(shards_[static_cast<size_t>(id)]);
        loaded_shard_ = id;
    } else if (loaded_shard_ != id) {
        const Shard& sh = shards_[static_cast<size_t>(id)];
        megatron_.reset();
        doc_starts_ = {};
        const int64_t n = read_shard(sh.path, vocab_, &tokens_).num_tokens;
        if (n != sh.num_tokens)
            SOF_FAIL(Io, "token shard %s changed while training: %lld tokens, was %lld",
                     sh.path.c_str(), static_cast<long long>(n),
                     static_cast<long long>(sh.num_tokens));
        if (masked_) read_mask(mask_path(sh.path), n, &mask_);
        loaded_shard_ = id;
    }
}

void DataLoader::check_eos(const config::DataConfig& cfg, int vocab_size) const {
    if (cfg.pack && (cfg.eos_id < 0 || cfg.eos_id >= vocab_size))
        SOF_FAIL(Config,
                 "data.pack = true needs the document separator: data.eos_id = %d is not a "
                 "token id of the vocabulary (0..%d); set data.eos_id to the tokenizer's EOS "
                 "id (scripts/prepare_data.py writes it to prepare.json as eos_token_id)",
                 cfg.eos_id, vocab_size - 1);
}

void DataLoader::load_megatron(const Shard& sh) {
    std::vector<int64_t> starts;
    const MegatronInfo info = read_megatron_index(sh.path, pack_ ? &starts : nullptr);
    if (info.num_tokens != sh.num_tokens)
        SOF_FAIL(Io, "Megatron dataset %s changed while training: %lld tokens, was %lld",
                 sh.path.c_str(), static_cast<long long>(info.num_tokens),
                 static_cast<long long>(sh.num_tokens));
    megatron_ = std::make_unique<MegatronTokens>(info);
    doc_starts_ = std::move(starts);
    tokens_ = ShardTokens{}; // an llm.c shard read before: its memory goes
    mask_ = {};
}

// Packing's document ids and boundary targets from a Megatron index: the input at token offset p
// is the last of its document when a document starts at p + 1.
void DataLoader::mark_documents(int64_t offset, int* targets, int* segments) const {
    for (int b = 0; b < B_; b++) {
        const size_t row = static_cast<size_t>(b) * T_;
        const int64_t first = offset + static_cast<int64_t>(b) * T_; // token offset of input 0
        auto it = std::upper_bound(doc_starts_.begin(), doc_starts_.end(), first);
        int seg = 0;
        for (int t = 0; t < T_; t++) {
            segments[row + t] = seg;
            if (it != doc_starts_.end() && *it == first + t + 1) {
                targets[row + t] = kIgnoreTarget;
                seg++;
                ++it;
            }
        }
    }
}

void DataLoader::next(int* inputs, int* targets, int* segments) {
    if ((segments != nullptr) != pack_)
        SOF_FAIL(Internal, "data loader (%s): segments %s but packing is %s", key_.c_str(),
                 segments ? "given" : "missing", pack_ ? "on" : "off");
    const int64_t id = shard_id(pos_.shard);
    const Shard& sh = shards_[static_cast<size_t>(id)];
    const int64_t g = shuffle_ ? sample_order_[static_cast<size_t>(pos_.sample)] : pos_.sample;
    const int64_t bt = static_cast<int64_t>(B_) * T_;
    const int64_t offset =
        g * accum_ * world_ * bt + (static_cast<int64_t>(micro_) * world_ + rank_) * bt;
    if (sh.megatron) {
        window_.resize(static_cast<size_t>(bt + 1));
        megatron_->read(offset, bt + 1, vocab_, window_.data());
        copy_batch(window_.data(), bt, inputs, targets);
    } else if (tokens_.token_bytes == 2) {
        copy_batch(tokens_.u16.data() + offset, bt, inputs, targets);
    } else {
        copy_batch(tokens_.u32.data() + offset, bt, inputs, targets);
    }
    if (masked_) apply_mask(mask_.data() + offset, bt, targets);
    if (pack_ && sh.megatron) {
        mark_documents(offset, targets, segments);
    } else if (pack_) {
        for (int b = 0; b < B_; b++) {
            const size_t row = static_cast<size_t>(b) * T_;
            int seg = 0;
            for (int t = 0; t < T_; t++) {
                segments[row + t] = seg;
                if (inputs[row + t] == eos_) { // its document ends here
                    targets[row + t] = kIgnoreTarget;
                    seg++;
                }
            }
        }
    }
    if (++micro_ < accum_) return; // the same global batch goes on
    micro_ = 0;
    pos_.sample++;
    if (pos_.sample >= sh.num_samples) {
        pos_.sample = 0;
        pos_.shard++;
        if (pos_.shard >= pos_.num_shards) {
            pos_.shard = 0;
            pos_.epoch++;
        }
    }
    prepare();
}

void DataLoader::reset() {
    pos_.epoch = pos_.shard = pos_.sample = 0;
    micro_ = 0;
    prepare();
}

LoaderState DataLoader::state() const {
    return pos_;
}

void DataLoader::restore(const LoaderState& s) {
    const LoaderState& me = pos_;
    auto differs = [](int64_t saved, int64_t mine) { return saved != 0 && saved != mine; };
    // the position is a global batch index: another rank count resumes it when the global batch
    // (ranks x batch_size x seq_len) is the same
    const int64_t saved_global =
        s.batch_tokens * (s.world != 0 ? s.world : me.world) * (s.accum != 0 ? s.accum : 1);
    if (differs(s.num_shards, me.num_shards) || differs(s.num_tokens, me.num_tokens) ||
        differs(saved_global, me.batch_tokens * me.world * me.accum) ||
        (s.num_shards != 0 && (s.shuffle != me.shuffle || s.seed != me.seed)))
        SOF_FAIL(Config,
                 "%s: the saved data position (%s) was made for different data or batch "
                 "geometry than this run (%s): resume with the same data, global batch (data-"
                 "parallel ranks x train.batch_size x train.grad_accum x train.seq_len; "
                 "train.global_batch keeps it at any rank count) and data.shuffle/data.seed",
                 key_.c_str(), s.to_string().c_str(), me.to_string().c_str());
    if (s.shard >= me.num_shards || s.sample >= shards_[static_cast<size_t>(s.shard)].num_samples)
        SOF_FAIL(Config, "%s: the saved data position (%s) is outside the data (%lld shards)",
                 key_.c_str(), s.to_string().c_str(), static_cast<long long>(me.num_shards));
    pos_.epoch = s.epoch;
    pos_.shard = s.shard;
    pos_.sample = s.sample;
    micro_ = 0;
    prepare();
}

std::string DataLoader::describe() const {
    std::string src;
    if (chain_)
        src = core::strfmt("builtin Markov corpus (V=%d, %d successors/token)", vocab_,
                           MarkovChain::kSuccessors);
    else
        src = "'" + source_ + "'";
    const size_t mega = static_cast<size_t>(
        std::count_if(shards_.begin(), shards_.end(), [](const Shard& s) { return s.megatron; }));
    const std::string ends = mega == shards_.size() ? std::string("as its index lists")
                             : mega > 0
                                 ? core::strfmt("at EOS %d or as a Megatron index lists", eos_)
                                 : core::strfmt("at EOS %d", eos_);
    return core::strfmt(
        "%s: %zu shard(s)%s%s%s, %lld tokens, %lld batches of %s%dx%d per epoch "
        "(rank %d of %d), %s",
        src.c_str(), shards_.size(),
        mega > 0 ? core::strfmt(" (%zu Megatron dataset(s))", mega).c_str() : "",
        masked_ ? " with loss masks" : "",
        pack_ ? core::strfmt(", packed (documents end %s)", ends.c_str()).c_str() : "",
        static_cast<long long>(num_tokens_), static_cast<long long>(batches_per_epoch_),
        accum_ > 1 ? core::strfmt("%d x ", accum_).c_str() : "", B_, T_, rank_, world_,
        shuffle_
            ? core::strfmt("shuffled (seed %llu)", static_cast<unsigned long long>(seed_)).c_str()
            : "sequential");
}

double DataLoader::entropy_floor() const {
    return chain_ ? chain_->entropy_rate() : std::numeric_limits<double>::quiet_NaN();
}

} // namespace sof::data
