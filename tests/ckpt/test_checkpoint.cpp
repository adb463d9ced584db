// Checkpoint save/load: exact round trip of state and manifest, atomic protocol (leftover .tmp
// directories ignored, re-saving a step), keep=N pruning, multi-rank shards written in one process.
#include <doctest/doctest.h>

#include <filesystem>

#include "ckpt/checkpoint.h"
#include "ckpt/fileio.h"
#include "ckpt_test_util.h"

using namespace sof;
using namespace sof::test;
namespace fs = std::filesystem;

namespace {

model::ArchConfig tiny_model() {
    model::ArchConfig c;
    c.max_seq_len = 4;
    c.vocab_size = 10;
    c.padded_vocab_size = 16;
    c.num_layers = 1;
    c.num_heads = 2;
    c.channels = 8;
    return c;
}

ckpt::Manifest tiny_manifest(int64_t step) {
    ckpt::Manifest m;
    m.step = step;
    m.opt_step = step - 1;
    m.model = tiny_model();
    m.num_params = static_cast<int64_t>(model::make_layout(m.model).num_params);
    m.world_size = 1;
    m.deck_yaml = "model:\n  num_layers: 1\n# a \"quoted\" comment\\ with \t tab\n";
    m.train_data.epoch = 2;
    m.train_data.shard = 1;
    m.train_data.sample = 17;
    m.train_data.num_shards = 3;
    m.train_data.num_tokens = 30000;
    m.train_data.batch_tokens = 64;
    m.train_data.world = 1;
    m.train_data.shuffle = 1;
    m.train_data.seed = 1337;
    m.skips = 3;
    m.rollbacks = 5;
    return m;
}

ckpt::State tiny_state(size_t n, uint32_t salt) {
    ckpt::State s;
    s.params = pattern(n, salt);
    s.exp_avg = pattern(n, salt + 1);
    s.exp_avg_sq = pattern(n, salt + 2);
    return s;
}

void check_same_manifest(const ckpt::Manifest& a, const ckpt::Manifest& b) {
    CHECK(a.step == b.step);
    CHECK(a.opt_step == b.opt_step);
    CHECK(a.model.max_seq_len == b.model.max_seq_len);
    CHECK(a.model.vocab_size == b.model.vocab_size);
    CHECK(a.model.padded_vocab_size == b.model.padded_vocab_size);
    CHECK(a.model.num_layers == b.model.num_layers);
    CHECK(a.model.num_heads == b.model.num_heads);
    CHECK(a.model.channels == b.model.channels);
    CHECK(a.num_params == b.num_params);
    CHECK(a.world_size == b.world_size);
    CHECK(a.deck_yaml == b.deck_yaml);
    CHECK(a.train_data == b.train_data);
    CHECK(a.skips == b.skips);
    CHECK(a.rollbacks == b.rollbacks);
}

} // namespace

TEST_CASE("save/load round trip is exact") {
    std::string root = ckpt_scratch("roundtrip");
    ckpt::Manifest m = tiny_manifest(100);
    ckpt::State s = tiny_state(static_cast<size_t>(m.num_params), 7);
    std::string dir = ckpt::save(root, m, s, 2, 0, 1);
    CHECK(dir == root + "/step_00000100");
    CHECK(fs::exists(dir + "/manifest.json"));
    CHECK(fs::exists(dir + "/deck.yaml"));
    CHECK(fs::file_size(dir + "/params.bin") == static_cast<uintmax_t>(m.num_params) * 4);
    CHECK(slurp(dir + "/deck.yaml") == m.deck_yaml);
    CHECK_FALSE(fs::exists(root + "/.tmp-step_00000100"));
    // the shard records used while saving are gone from the final directory
    CHECK_FALSE(fs::exists(dir + "/shard.rank00000.json"));

    ckpt::Manifest m2;
    ckpt::State s2;
    ckpt::load(dir, &m2, &s2, 0, 1);
    check_same_manifest(m, m2);
    CHECK(bit_equal(s.params, s2.params));
    CHECK(bit_equal(s.exp_avg, s2.exp_avg));
    CHECK(bit_equal(s.exp_avg_sq, s2.exp_avg_sq));
    CHECK(ckpt::find_latest(root) == dir);

    ckpt::Manifest m3 = ckpt::load_manifest(dir);
    check_same_manifest(m, m3);
    std::vector<float> p;
    ckpt::load_params(dir, &m3, &p);
    CHECK(bit_equal(p, s.params));
}

TEST_CASE("find_latest: none, newest complete, leftover temporary directories ignored") {
    std::string root = ckpt_scratch("latest");
    CHECK(ckpt::find_latest(root) == "");
    CHECK(ckpt::find_latest(root + "/does-not-exist") == "");
    ckpt::Manifest m = tiny_manifest(5);
    ckpt::State s = tiny_state(static_cast<size_t>(m.num_params), 1);
    ckpt::save(root, m, s, 0, 0, 1);
    m.step = 10;
    m.opt_step = 10;
    std::string d10 = ckpt::save(root, m, s, 0, 0, 1);
    // an interrupted save of step 20: its temporary directory holds files but is not a checkpoint
    fs::create_directories(root + "/.tmp-step_00000020");
    spit(root + "/.tmp-step_00000020/params.bin", "partial");
    // a step directory without a manifest (e.g. copied by hand, incomplete) is not complete
    fs::create_directories(root + "/step_00000030");
    spit(root + "/step_00000030/params.bin", "partial");
    // unrelated entries
    spit(root + "/step_00000040", "a file, not a directory");
    fs::create_directories(root + "/step_abc");
    CHECK(ckpt::find_latest(root) == d10);

    // the incomplete step_00000030 gives a clear error when named explicitly
    ckpt::Manifest mm;
    ckpt::State ss;
    expect_error([&] { ckpt::load(root + "/step_00000030", &mm, &ss, 0, 1); }, core::ErrorKind::Io,
                 {"manifest.json", "step_00000030"});
    expect_error([&] { ckpt::load(root + "/.tmp-step_00000020", &mm, &ss, 0, 1); },
                 core::ErrorKind::Io, {".tmp-step_00000020", "interrupted"});
    // the root itself: points at its newest step
    expect_error([&] { ckpt::load(root, &mm, &ss, 0, 1); }, core::ErrorKind::Io,
                 {"step_00000010", "resume=auto"});

    // the next complete save removes the stale temporary directory
    m.step = 25;
    ckpt::save(root, m, s, 0, 0, 1);
    CHECK_FALSE(fs::exists(root + "/.tmp-step_00000020"));
    CHECK(ckpt::find_latest(root) == root + "/step_00000025");
}

TEST_CASE("keep=N prunes older checkpoints only after the new one is complete") {
    std::string root = ckpt_scratch("keep");
    ckpt::Manifest m = tiny_manifest(0);
    ckpt::State s = tiny_state(static_cast<size_t>(m.num_params), 3);
    for (int step = 1; step <= 5; step++) {
        m.step = step;
        ckpt::save(root, m, s, 2, 0, 1);
    }
    std::vector<std::string> names;
    for (auto& e : fs::directory_iterator(root))
        names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    REQUIRE(names.size() == 2);
    CHECK(names[0] == "step_00000004");
    CHECK(names[1] == "step_00000005");

    // after resuming from an older step: the new checkpoint is never pruned, newer ones stay
    m.step = 3;
    ckpt::save(root, m, s, 2, 0, 1);
    CHECK(fs::exists(root + "/step_00000003"));
    CHECK(fs::exists(root + "/step_00000004"));
    CHECK(fs::exists(root + "/step_00000005"));
    m.step = 4; // re-saved: competes with 3 (older) only
    ckpt::save(root, m, s, 1, 0, 1);
    CHECK_FALSE(fs::exists(root + "/step_00000003"));
    CHECK(fs::exists(root + "/step_00000004"));
    CHECK(fs::exists(root + "/step_00000005"));

    // keep = 0 keeps everything
    std::string all = ckpt_scratch("keep_all");
    for (int step = 1; step <= 4; step++) {
        m.step = step;
        ckpt::save(all, m, s, 0, 0, 1);
    }
    CHECK(std::distance(fs::directory_iterator(all), fs::directory_iterator()) == 4);

    // a save that fails (state inconsistent with the manifest) deletes nothing
    ckpt::State bad = s;
    bad.exp_avg.pop_back();
    m.step = 6;
    CHECK_THROWS_AS(ckpt::save(root, m, bad, 1, 0, 1), core::Error);
    CHECK(fs::exists(root + "/step_00000004"));
    CHECK(fs::exists(root + "/step_00000005"));
    CHECK(ckpt::find_latest(root) == root + "/step_00000005");
}

TEST_CASE("saving the same step again replaces it") {
    std::string root = ckpt_scratch("resave");
    ckpt::Manifest m = tiny_manifest(8);
    ckpt::State a = tiny_state(static_cast<size_t>(m.num_params), 11);
    ckpt::State b = tiny_state(static_cast<size_t>(m.num_params), 22);
    ckpt::save(root, m, a, 0, 0, 1);
    std::string dir = ckpt::save(root, m, b, 0, 0, 1);
    ckpt::Manifest m2;
    ckpt::State s2;
    ckpt::load(dir, &m2, &s2, 0, 1);
    CHECK(bit_equal(s2.params, b.params));
    CHECK(std::distance(fs::directory_iterator(root), fs::directory_iterator()) == 1);
}

// The ZeRO-3 shard of rank r of `world`: real elements of its per-unit padded slices.
std::vector<float> zero3_shard(const model::ParamLayout& l, const std::vector<float>& full,
                               int world, int r) {
    zero::ShardMap map = zero::make_shard_map(l, world, r);
    std::vector<float> padded(map.local_size), real(map.real_size);
    zero::shard_scatter(l, map, full.data(), padded.data());
    zero::shard_pack_real(l, map, padded.data(), real.data());
    return real;
}

TEST_CASE("multi-rank: per-rank shard files, rank 0 manifest, world-size mismatch") {
    std::string root = ckpt_scratch("ranks");
    const int world = 3;
    ckpt::Manifest m = tiny_manifest(12);
    m.world_size = world;
    const size_t n = static_cast<size_t>(m.num_params);
    const model::ParamLayout lay = model::make_layout(m.model);
    ckpt::State full = tiny_state(n, 5);
    std::vector<ckpt::State> shards(world);
    for (int r = 0; r < world; r++) {
        shards[r].params = zero3_shard(lay, full.params, world, r);
        shards[r].exp_avg = zero3_shard(lay, full.exp_avg, world, r);
        shards[r].exp_avg_sq = zero3_shard(lay, full.exp_avg_sq, world, r);
    }
    // the 6-argument save cannot synchronize ranks
    CHECK_THROWS_AS(ckpt::save(root, m, shards[0], 0, 0, world), core::Error);

    // the phases, as ranks would run them between barriers (ranks out of order on purpose)
    ckpt::prepare_save(root, m.step);
    for (int r : {2, 0, 1})
        ckpt::write_shard(root, m, shards[r], r, world);
    std::string dir = ckpt::commit(root, m, 0);
    CHECK(dir == root + "/step_00000012");
    CHECK(fs::exists(dir + "/params.rank00001.bin"));
    CHECK(fs::exists(dir + "/exp_avg_sq.rank00002.bin"));
    CHECK_FALSE(fs::exists(dir + "/params.bin"));

    for (int r = 0; r < world; r++) {
        ckpt::Manifest m2;
        ckpt::State s2;
        ckpt::load(dir, &m2, &s2, r, world);
        check_same_manifest(m, m2);
        CHECK(bit_equal(s2.params, shards[r].params));
        CHECK(bit_equal(s2.exp_avg, shards[r].exp_avg));
        CHECK(bit_equal(s2.exp_avg_sq, shards[r].exp_avg_sq));
    }
    ckpt::Manifest m3;
    std::vector<float> p;
    ckpt::load_params(dir, &m3, &p);
    CHECK(bit_equal(p, full.params));

    ckpt::Manifest mm;
    ckpt::State ss;
    expect_error([&] { ckpt::load(dir, &mm, &ss, 0, 2); }, core::ErrorKind::Config,
                 {"3 rank(s)", "has 2", "relaunch with 3"});

    // resharding on load: 3 shards read back as 1, 2, 4 and 7 shards, exactly
    for (int w2 : {1, 2, 4, 7})
        for (int r = 0; r < w2; r++) {
            ckpt::Manifest m4;
            ckpt::State s4;
            ckpt::load_resharded(dir, lay, zero::make_shard_map(lay, w2, r), &m4, &s4);
            CHECK(m4.world_size == world);
            CHECK(bit_equal(s4.params, zero3_shard(lay, full.params, w2, r)));
            CHECK(bit_equal(s4.exp_avg, zero3_shard(lay, full.exp_avg, w2, r)));
            CHECK(bit_equal(s4.exp_avg_sq, zero3_shard(lay, full.exp_avg_sq, w2, r)));
        }

    // commit before every rank wrote its shard: names the missing record, renames nothing
    m.step = 13;
    ckpt::prepare_save(root, m.step);
    ckpt::write_shard(root, m, shards[0], 0, world);
    ckpt::write_shard(root, m, shards[2], 2, world);
    expect_error([&] { ckpt::commit(root, m, 0); }, core::ErrorKind::Io, {"shard.rank00001.json"});
    CHECK(ckpt::find_latest(root) == dir);

    // the synchronized form of save: one agreement per phase (prepare, write, commit)
    int agreements = 0, barriers = 0;
    ckpt::SaveSync sync{[&] { barriers++; },
                        [&](bool failed) {
                            agreements++;
                            return failed;
                        }};
    m.step = 14;
    m.world_size = 1;
    ckpt::State one = full;
    CHECK(ckpt::save(root, m, &one, 0, 0, 1, sync) == root + "/step_00000014");
    CHECK(agreements == 3);
    CHECK(barriers == 0);
    CHECK(ckpt::find_latest(root) == root + "/step_00000014");
}

TEST_CASE("block checksum: per-64MiB FNV-1a 64, combined over the block hashes") {
    // reference written out sequentially, independent of the threaded implementation
    auto reference = [](const std::vector<unsigned char>& d) {
        const size_t B = size_t(64) << 20;
        std::vector<uint64_t> hs;
        for (size_t b = 0; b == 0 || b * B < d.size(); b++) {
            uint64_t h = 0xcbf29ce484222325ull;
            for (size_t i = b * B; i < std::min(d.size(), (b + 1) * B); i++) {
                h ^= d[i];
                h *= 0x100000001b3ull;
            }
            hs.push_back(h);
        }
        uint64_t h = 0xcbf29ce484222325ull;
        for (uint64_t v : hs)
            for (int k = 0; k < 8; k++) {
                h ^= (v >> (8 * k)) & 0xff;
                h *= 0x100000001b3ull;
            }
        return h;
    };
    CHECK(ckpt::fnv1a64("a", 1) == 0xaf63dc4c8601ec8cull); // published FNV-1a 64 test vector
    std::vector<unsigned char> empty;
    CHECK(ckpt::block_checksum(empty.data(), 0) == reference(empty));
    std::vector<unsigned char> d((size_t(64) << 20) * 2 + 100);
    for (size_t i = 0; i < d.size(); i++)
        d[i] = static_cast<unsigned char>((i * 2654435761u) >> 13);
    const uint64_t h = ckpt::block_checksum(d.data(), d.size());
    CHECK(h == reference(d));
    d[(size_t(64) << 20) + 7] ^= 1; // one bit in the second block
    CHECK(ckpt::block_checksum(d.data(), d.size()) != h);
}
