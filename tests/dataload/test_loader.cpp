// DataLoader ordering: llm.c sequential order bit-exact, B*T+1 shards, multi-shard wrap, rank
// striping, deterministic shuffle (each epoch a permutation), state/restore continuation.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <vector>

#include "data/loader.h"
#include "dataload/shard_util.h"

using namespace sof;
using sof::test::scratch;
using sof::test::tokens_for;
using sof::test::write_shard;

namespace {

constexpr int kVocab = 65521; // prime: tokens_for() values are distinct within a shard

struct Batch {
    std::vector<int> in, tg;
    bool operator==(const Batch&) const = default;
};

Batch next_batch(data::DataLoader& dl, int B, int T) {
    Batch b;
    b.in.resize(static_cast<size_t>(B) * T);
    b.tg.resize(static_cast<size_t>(B) * T);
    dl.next(b.in.data(), b.tg.data());
    return b;
}

config::DataConfig shard_cfg(const std::string& glob, bool shuffle, uint64_t seed = 1337) {
    config::DataConfig c;
    c.train = glob;
    c.val = glob;
    c.shuffle = shuffle;
    c.seed = seed;
    return c;
}

// The llm.c order written out independently: per epoch, per shard (sorted), per global batch
// s < (n-1)/(W*B*T), rank r reads B*T+1 tokens at s*W*B*T + r*B*T.
std::vector<Batch> llmc_reference(const std::vector<std::vector<uint16_t>>& shards, int B, int T,
                                  int rank, int world, int count) {
    std::vector<Batch> out;
    const size_t bt = static_cast<size_t>(B) * T;
    while (static_cast<int>(out.size()) < count) {
        for (const auto& sh : shards) {
            size_t nsamp = (sh.size() - 1) / (world * bt);
            for (size_t s = 0; s < nsamp; s++) {
                Batch b;
                size_t off = s * world * bt + rank * bt;
                for (size_t i = 0; i < bt; i++) {
                    b.in.push_back(sh[off + i]);
                    b.tg.push_back(sh[off + i + 1]);
                }
                out.push_back(b);
            }
        }
    }
    out.resize(static_cast<size_t>(count));
    return out;
}

} // namespace

TEST_CASE("sequential order is llm.c's, bit-exact (hand-checked small case)") {
    std::string d = scratch("seq_small");
    std::vector<uint16_t> t(21);
    for (int i = 0; i < 21; i++)
        t[i] = static_cast<uint16_t>(100 + i);
    write_shard(d + "/a.bin", t);
    data::DataLoader dl(shard_cfg(d + "/a.bin", false), data::Split::Train, 512, 2, 3, 0, 1);
    CHECK(dl.batches_per_epoch() == 3); // (21 - 1) / 6
    Batch b = next_batch(dl, 2, 3);
    CHECK(b.in == std::vector<int>{100, 101, 102, 103, 104, 105});
    CHECK(b.tg == std::vector<int>{101, 102, 103, 104, 105, 106});
    b = next_batch(dl, 2, 3);
    CHECK(b.in == std::vector<int>{106, 107, 108, 109, 110, 111});
    b = next_batch(dl, 2, 3);
    CHECK(b.in == std::vector<int>{112, 113, 114, 115, 116, 117});
    CHECK(b.tg == std::vector<int>{113, 114, 115, 116, 117, 118});
    CHECK(dl.state().epoch == 1);
    b = next_batch(dl, 2, 3); // wraps to the start
    CHECK(b.in == std::vector<int>{100, 101, 102, 103, 104, 105});
    CHECK(std::isnan(dl.entropy_floor()));
}

TEST_CASE("a shard of exactly B*T+1 tokens yields the same batch every time") {
    std::string d = scratch("bt1");
    const int B = 2, T = 8;
    std::vector<uint16_t> t = tokens_for(B * T + 1, kVocab, 5);
    write_shard(d + "/only.bin", t);
    data::DataLoader dl(shard_cfg(d + "/only.bin", false), data::Split::Train, kVocab, B, T, 0, 1);
    CHECK(dl.batches_per_epoch() == 1);
    Batch first = next_batch(dl, B, T);
    for (int i = 0; i < B * T; i++) {
        CHECK(first.in[i] == t[i]);
        CHECK(first.tg[i] == t[i + 1]);
    }
    for (int k = 0; k < 5; k++)
        CHECK(next_batch(dl, B, T) == first);
    CHECK(dl.state().epoch == 6);
    // shuffled: a one-batch shard still yields that batch
    data::DataLoader sh(shard_cfg(d + "/only.bin", true), data::Split::Train, kVocab, B, T, 0, 1);
    for (int k = 0; k < 3; k++)
        CHECK(next_batch(sh, B, T) == first);
}

TEST_CASE("multi-shard: sorted glob, tail tokens skipped, wrap to the first shard") {
    std::string d = scratch("multi");
    const int B = 2, T = 4;
    // sizes: 3 batches + 5 spare, exactly 1 batch + 1, 2 batches + 1 (written out of order)
    std::vector<std::vector<uint16_t>> shards = {tokens_for(3 * 8 + 5, kVocab, 0),
                                                 tokens_for(8 + 1, kVocab, 20000),
                                                 tokens_for(2 * 8 + 1, kVocab, 40000)};
    write_shard(d + "/s_02.bin", shards[2]);
    write_shard(d + "/s_00.bin", shards[0]);
    write_shard(d + "/s_01.bin", shards[1]);
    write_shard(d + "/other.bin", tokens_for(100, kVocab, 1)); // not matched by the glob
    data::DataLoader dl(shard_cfg(d + "/s_*.bin", false), data::Split::Train, kVocab, B, T, 0, 1);
    CHECK(dl.batches_per_epoch() == 6);
    std::vector<Batch> ref = llmc_reference(shards, B, T, 0, 1, 20);
    for (int k = 0; k < 20; k++) {
        INFO("batch " << k);
        CHECK(next_batch(dl, B, T) == ref[static_cast<size_t>(k)]);
    }
    CHECK(dl.state().epoch == 3);
    CHECK(dl.state().shard == 0);
    CHECK(dl.state().sample == 2);
    dl.reset();
    CHECK(next_batch(dl, B, T) == ref[0]);
    CHECK(dl.describe().find("3 shard(s)") != std::string::npos);
}

TEST_CASE("rank striping: rank r reads at s*W*B*T + r*B*T") {
    std::string d = scratch("ranks");
    const int B = 2, T = 4, W = 3;
    std::vector<std::vector<uint16_t>> shards = {tokens_for(2 * W * 8 + 3, kVocab, 0),
                                                 tokens_for(W * 8 + 1, kVocab, 30000)};
    write_shard(d + "/a.bin", shards[0]);
    write_shard(d + "/b.bin", shards[1]);
    std::set<int> firsts;
    for (int r = 0; r < W; r++) {
        data::DataLoader dl(shard_cfg(d + "/*.bin", false), data::Split::Train, kVocab, B, T, r, W);
        CHECK(dl.batches_per_epoch() == 3);
        std::vector<Batch> ref = llmc_reference(shards, B, T, r, W, 7);
        for (int k = 0; k < 7; k++) {
            Batch b = next_batch(dl, B, T);
            CHECK(b == ref[static_cast<size_t>(k)]);
            if (k < 3) firsts.insert(b.in[0]);
        }
    }
    CHECK(firsts.size() == 9); // ranks never read the same batch within an epoch
    // explicit: rank 1 of 3, second batch of shard a starts at token 1*24 + 1*8 = 32
    data::DataLoader r1(shard_cfg(d + "/*.bin", false), data::Split::Train, kVocab, B, T, 1, W);
    next_batch(r1, B, T);
    CHECK(next_batch(r1, B, T).in[0] == shards[0][32]);
}

TEST_CASE("shuffle: deterministic from the seed, each epoch a permutation of the batches") {
    std::string d = scratch("shuffle");
    const int B = 1, T = 4;
    std::vector<std::vector<uint16_t>> shards = {tokens_for(10 * 4 + 1, kVocab, 0),
                                                 tokens_for(7 * 4 + 1, kVocab, 20000),
                                                 tokens_for(5 * 4 + 2, kVocab, 40000)};
    for (size_t i = 0; i < shards.size(); i++)
        write_shard(d + "/s" + std::to_string(i) + ".bin", shards[i]);
    const std::string glob = d + "/s*.bin";
    data::DataLoader a(shard_cfg(glob, true, 7), data::Split::Train, kVocab, B, T, 0, 1);
    data::DataLoader b(shard_cfg(glob, true, 7), data::Split::Train, kVocab, B, T, 0, 1);
    data::DataLoader c(shard_cfg(glob, true, 8), data::Split::Train, kVocab, B, T, 0, 1);
    const int n = static_cast<int>(a.batches_per_epoch());
    CHECK(n == 22);
    std::vector<Batch> seq = llmc_reference(shards, B, T, 0, 1, n);
    std::vector<Batch> e0, e1, other;
    for (int k = 0; k < n; k++)
        e0.push_back(next_batch(a, B, T));
    for (int k = 0; k < n; k++)
        e1.push_back(next_batch(a, B, T));
    for (int k = 0; k < 2 * n; k++) {
        Batch bb = next_batch(b, B, T);
        CHECK(bb == (k < n ? e0[k] : e1[k - n]));
    }
    for (int k = 0; k < n; k++)
        other.push_back(next_batch(c, B, T));
    CHECK(e0 != seq);   // shuffled
    CHECK(e0 != e1);    // a new order each epoch
    CHECK(e0 != other); // another seed, another order
    auto key = [](const Batch& x) { return int64_t(x.in[0]) * 100000 + x.tg.back(); };
    for (const auto* ep : {&e0, &e1, &other}) {
        std::multiset<int64_t> got, want;
        for (const Batch& x : *ep)
            got.insert(key(x));
        for (const Batch& x : seq)
            want.insert(key(x));
        CHECK(got == want); // every batch exactly once per epoch
    }
    // the validation split is always sequential
    data::DataLoader v(shard_cfg(glob, true, 7), data::Split::Val, kVocab, B, T, 0, 1);
    for (int k = 0; k < n; k++)
        CHECK(next_batch(v, B, T) == seq[static_cast<size_t>(k)]);
    CHECK(v.describe().find("sequential") != std::string::npos);
    CHECK(a.describe().find("shuffled") != std::string::npos);
}

TEST_CASE("state/restore continues exactly (sequential, shuffled, builtin, many ranks)") {
    std::string d = scratch("restore");
    write_shard(d + "/s0.bin", tokens_for(9 * 6 + 1, kVocab, 0));
    write_shard(d + "/s1.bin", tokens_for(4 * 6 + 3, kVocab, 30000));
    struct Case {
        const char* name;
        config::DataConfig cfg;
        int vocab, rank, world;
    };
    config::DataConfig builtin;
    builtin.builtin.train_tokens = 4000;
    std::vector<Case> cases = {
        {"sequential", shard_cfg(d + "/*.bin", false), kVocab, 0, 1},
        {"shuffled", shard_cfg(d + "/*.bin", true, 99), kVocab, 0, 1},
        {"shuffled rank 1/2", shard_cfg(d + "/*.bin", true, 5), kVocab, 1, 2},
        {"builtin", builtin, 97, 0, 1}};
    const int B = 2, T = 3;
    for (const Case& c : cases) {
        INFO(c.name);
        data::DataLoader a(c.cfg, data::Split::Train, c.vocab, B, T, c.rank, c.world);
        const int skip = static_cast<int>(a.batches_per_epoch()) + 3; // into epoch 1
        for (int k = 0; k < skip; k++)
            next_batch(a, B, T);
        const std::string saved = a.state().to_string();
        data::LoaderState parsed = data::LoaderState::from_string(saved);
        CHECK(parsed == a.state());
        data::DataLoader b(c.cfg, data::Split::Train, c.vocab, B, T, c.rank, c.world);
        next_batch(b, B, T); // b is somewhere else before restoring
        b.restore(parsed);
        CHECK(b.state() == a.state());
        for (int k = 0; k < 2 * a.batches_per_epoch(); k++) {
            INFO("batch " << k << " after restore");
            REQUIRE(next_batch(a, B, T) == next_batch(b, B, T));
        }
        // restoring a default state means the start
        data::DataLoader fresh(c.cfg, data::Split::Train, c.vocab, B, T, c.rank, c.world);
        b.restore(data::LoaderState{});
        for (int k = 0; k < 4; k++)
            CHECK(next_batch(b, B, T) == next_batch(fresh, B, T));
    }
}

TEST_CASE("LoaderState text form") {
    data::LoaderState s;
    s.epoch = 3;
    s.shard = 1;
    s.sample = 17;
    s.num_shards = 2;
    s.num_tokens = 123456789012LL;
    s.batch_tokens = 1024;
    s.world = 4;
    s.shuffle = 1;
    s.seed = 18446744073709551615ULL;
    const std::string text = s.to_string();
    CHECK(text.find('\n') == std::string::npos);
    CHECK(text.rfind("v1 ", 0) == 0);
    CHECK(data::LoaderState::from_string(text) == s);
    CHECK(data::LoaderState::from_string(data::LoaderState{}.to_string()) == data::LoaderState{});
}
