// Loss masks (<shard>.mask) in the loader: masked targets become -1, the file errors, the
// data.loss_mask modes; the per-step order with accumulation (same sequences per step at any
// ranks x accum), and the state's accum field.
#include <doctest/doctest.h>

#include <fstream>
#include <functional>
#include <set>
#include <vector>

#include "core/error.h"
#include "data/loader.h"
#include "data/masks.h"
#include "dataload/shard_util.h"

using namespace sof;
using sof::test::scratch;
using sof::test::tokens_for;
using sof::test::write_shard;

namespace {

void write_mask(const std::string& path, const std::vector<uint8_t>& m, int32_t magic = 20250301,
                int64_t declared = -1) {
    std::vector<int32_t> header(256, 0);
    header[0] = magic;
    header[1] = 1;
    header[2] = static_cast<int32_t>(declared < 0 ? static_cast<int64_t>(m.size()) : declared);
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(header.data()), 1024);
    f.write(reinterpret_cast<const char*>(m.data()), static_cast<std::streamsize>(m.size()));
}

config::DataConfig cfg_for(const std::string& glob, const std::string& mode = "auto") {
    config::DataConfig c;
    c.train = c.val = glob;
    c.shuffle = false;
    c.loss_mask = mode;
    return c;
}

std::string error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const core::Error& e) {
        return e.what();
    }
    return "";
}

} // namespace

TEST_CASE("loss masks: a target whose mask byte is 0 is -1; the input stays") {
    const std::string d = scratch("masks_basic");
    const int B = 2, T = 4, n = 2 * B * T + 1;
    auto toks = tokens_for(n, 1000, 3);
    std::vector<uint8_t> m(n);
    for (int i = 0; i < n; i++)
        m[static_cast<size_t>(i)] = (i % 3 != 0) ? 1 : 0;
    write_shard(d + "/s_000.bin", toks);
    write_mask(d + "/s_000.bin.mask", m);
    data::DataLoader dl(cfg_for(d + "/s_*"), data::Split::Train, 1000, B, T, 0, 1);
    CHECK(dl.has_masks());
    CHECK(dl.batches_per_epoch() == 2); // the .mask file is not a shard
    std::vector<int> in(B * T), tg(B * T);
    for (int b = 0; b < 2; b++) {
        dl.next(in.data(), tg.data());
        for (int i = 0; i < B * T; i++) {
            const int p = b * B * T + i;
            CHECK(in[static_cast<size_t>(i)] == toks[static_cast<size_t>(p)]);
            CHECK(tg[static_cast<size_t>(i)] ==
                  (m[static_cast<size_t>(p + 1)] ? toks[static_cast<size_t>(p + 1)] : -1));
        }
    }
    // ignore: every target counts
    data::DataLoader off(cfg_for(d + "/s_*", "ignore"), data::Split::Train, 1000, B, T, 0, 1);
    CHECK_FALSE(off.has_masks());
    off.next(in.data(), tg.data());
    CHECK(tg[0] == toks[1]);
}

TEST_CASE("loss masks: modes and file errors name the file and the fix") {
    const std::string d = scratch("masks_errors");
    const int B = 1, T = 4, n = 9;
    write_shard(d + "/a_000.bin", tokens_for(n, 100, 1));
    write_shard(d + "/a_001.bin", tokens_for(n, 100, 2));
    write_mask(d + "/a_000.bin.mask", std::vector<uint8_t>(n, 1));
    auto make = [&](const std::string& mode) {
        data::DataLoader dl(cfg_for(d + "/a_*", mode), data::Split::Train, 100, B, T, 0, 1);
    };
    CHECK(error_of([&] { make("auto"); }).find("have none") != std::string::npos);
    CHECK(error_of([&] { make("require"); }).find("a_001.bin.mask") != std::string::npos);
    CHECK(error_of([&] { make("ignore"); }).empty());
    write_mask(d + "/a_001.bin.mask", std::vector<uint8_t>(n - 1, 1)); // wrong length
    CHECK(error_of([&] { make("require"); }).find("declares 8 tokens but its token shard has 9") !=
          std::string::npos);
    std::vector<uint8_t> bad(n, 1);
    bad[5] = 2;
    write_mask(d + "/a_001.bin.mask", bad);
    CHECK(error_of([&] { make("require"); }).find("byte 2 at token 5") != std::string::npos);
    write_mask(d + "/a_001.bin.mask", std::vector<uint8_t>(n, 1), 12345);
    CHECK(error_of([&] { make("require"); }).find("not a loss-mask file") != std::string::npos);
}

TEST_CASE("accumulation: a step reads the same sequences at any ranks x accum, resumable") {
    const std::string d = scratch("masks_accum");
    const int B = 2, T = 3, G = 4; // 4 sequences per step
    const int n = 5 * G * T + 1;
    write_shard(d + "/t_000.bin", tokens_for(n, 5000, 11));
    // sequences of step s: 1 rank x accum 2, or 2 ranks x accum 1 -> the same set
    auto step_seqs = [&](int world, int accum, int steps) {
        std::vector<std::multiset<std::vector<int>>> out(static_cast<size_t>(steps));
        for (int r = 0; r < world; r++) {
            data::DataLoader dl(cfg_for(d + "/t_*"), data::Split::Train, 5000, B, T, r, world,
                                accum);
            std::vector<int> in(B * T), tg(B * T);
            for (int s = 0; s < steps; s++)
                for (int a = 0; a < accum; a++) {
                    dl.next(in.data(), tg.data());
                    for (int b = 0; b < B; b++)
                        out[static_cast<size_t>(s)].insert(
                            std::vector<int>(in.begin() + b * T, in.begin() + (b + 1) * T));
                }
        }
        return out;
    };
    CHECK(step_seqs(1, 2, 5) == step_seqs(2, 1, 5));
    // a state saved at 2 ranks x accum 1 resumes at 1 rank x accum 2 (same global batch)
    data::DataLoader a(cfg_for(d + "/t_*"), data::Split::Train, 5000, B, T, 0, 2, 1);
    std::vector<int> in(B * T), tg(B * T);
    a.next(in.data(), tg.data());
    a.next(in.data(), tg.data());
    const data::LoaderState st = data::LoaderState::from_string(a.state().to_string());
    CHECK(st.accum == 1);
    data::DataLoader b(cfg_for(d + "/t_*"), data::Split::Train, 5000, B, T, 0, 1, 2);
    b.restore(st);
    CHECK(b.state().sample == 2);
    // another global batch is refused
    data::DataLoader c(cfg_for(d + "/t_*"), data::Split::Train, 5000, B, T, 0, 1, 1);
    CHECK(error_of([&] { c.restore(st); }).find("global_batch") != std::string::npos);
    // a state of an older version has no accum: read as 1
    CHECK(data::LoaderState::from_string("v1 epoch=0 shard=0 sample=1 shards=1 tokens=61 bt=6 "
                                         "world=2 shuffle=0 seed=0")
              .accum == 0);
}

TEST_CASE("packing: document ids restart after each EOS, the target after an EOS is -1") {
    const std::string d = scratch("pack_basic");
    const int B = 2, T = 6, E = 9; // E: the EOS id
    // rows: [1 2 E 3 E E] [4 5 6 E 7 8] then one more token (9 = E) for the last target
    const std::vector<uint16_t> toks = {1, 2, E, 3, E, E, 4, 5, 6, E, 7, 8, E};
    write_shard(d + "/p_000.bin", toks);
    config::DataConfig c = cfg_for(d + "/p_*");
    c.pack = true;
    c.eos_id = E;
    data::DataLoader dl(c, data::Split::Train, 16, B, T, 0, 1);
    CHECK(dl.packed());
    CHECK(dl.has_masks()); // targets may be -1: the trainer's counted mean applies
    std::vector<int> in(B * T), tg(B * T), seg(B * T);
    dl.next(in.data(), tg.data(), seg.data());
    CHECK(seg == std::vector<int>{0, 0, 0, 1, 1, 2, 0, 0, 0, 0, 1, 1});
    CHECK(tg == std::vector<int>{2, E, -1, E, -1, -1, 5, 6, E, -1, 8, E});
    CHECK(error_of([&] { dl.next(in.data(), tg.data()); }).find("segments missing") !=
          std::string::npos);
    // the EOS id must be a token of the vocabulary (the trainer resolves -1 first)
    c.eos_id = -1;
    CHECK(error_of([&] {
              data::DataLoader(c, data::Split::Train, 16, B, T, 0, 1);
          }).find("data.eos_id = -1") != std::string::npos);
}
