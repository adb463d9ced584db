// Megatron-LM indexed datasets in the loader: the same batches as an llm.c shard of the same tokens
// (1 and 2 ranks, shuffled, accumulated, packed), document boundaries from the index, every
// integer dtype, and an error naming the file and the field for each broken part of the format.
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <functional>
#include <vector>

#include "config/data_files.h"
#include "core/error.h"
#include "data/loader.h"
#include "data/megatron.h"
#include "dataload/shard_util.h"

using namespace sof;
using sof::test::megatron_of;
using sof::test::MegatronFiles;
using sof::test::scratch;
using sof::test::write_megatron;
using sof::test::write_shard;

namespace {

using Docs = std::vector<std::vector<std::vector<int64_t>>>;

// documents of 1..11 tokens in 1..3 sentences, ids < vocab; with eos >= 0 each ends with it (as
// preprocess_data.py --append-eod writes them) and no other token is eos
Docs make_docs(int n, int vocab, int eos, uint64_t seed) {
    Docs docs;
    uint64_t x = seed;
    auto next = [&x] {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        return static_cast<int64_t>(x >> 33);
    };
    for (int d = 0; d < n; d++) {
        std::vector<std::vector<int64_t>> doc;
        const int sentences = 1 + static_cast<int>(next() % 3);
        for (int s = 0; s < sentences; s++) {
            std::vector<int64_t> sent;
            const int len = 1 + static_cast<int>(next() % 4);
            for (int i = 0; i < len; i++) {
                int64_t t = next() % vocab;
                if (t == eos) t = (t + 1) % vocab;
                sent.push_back(t);
            }
            doc.push_back(sent);
        }
        if (eos >= 0) doc.back().push_back(eos);
        docs.push_back(doc);
    }
    return docs;
}

std::vector<uint16_t> flat16(const Docs& docs) {
    std::vector<uint16_t> out;
    for (const auto& d : docs)
        for (const auto& s : d)
            for (int64_t t : s)
                out.push_back(static_cast<uint16_t>(t));
    return out;
}

config::DataConfig data_cfg(const std::string& value, bool shuffle, bool pack, int eos) {
    config::DataConfig c;
    c.train = c.val = value;
    c.shuffle = shuffle;
    c.pack = pack;
    c.eos_id = eos;
    return c;
}

struct Batch {
    std::vector<int> in, tg, seg;
    bool operator==(const Batch&) const = default;
};

std::vector<Batch> batches(const config::DataConfig& c, int vocab, int B, int T, int rank,
                           int world, int accum, int n) {
    data::DataLoader dl(c, data::Split::Train, vocab, B, T, rank, world, accum);
    std::vector<Batch> out;
    for (int i = 0; i < n; i++) {
        Batch b{std::vector<int>(B * T), std::vector<int>(B * T),
                std::vector<int>(c.pack ? B * T : 0)};
        dl.next(b.in.data(), b.tg.data(), c.pack ? b.seg.data() : nullptr);
        out.push_back(b);
    }
    return out;
}

std::string error_of(const std::function<void()>& f, core::ErrorKind* kind = nullptr) {
    try {
        f();
    } catch (const core::Error& e) {
        if (kind) *kind = e.kind();
        return e.what();
    }
    return "";
}

bool has(const std::string& s, const std::string& part) {
    return s.find(part) != std::string::npos;
}

} // namespace

TEST_CASE("megatron: the index is read as written (counts, tokens, document starts)") {
    const std::string d = scratch("megatron_index");
    const Docs docs = {{{1, 2, 3}}, {{4, 5}, {6, 7, 8}}, {}, {{9}}};
    write_megatron(d + "/a", megatron_of(docs));
    std::vector<int64_t> starts;
    const data::MegatronInfo info = data::read_megatron_index(d + "/a", &starts);
    CHECK(info.dtype_code == 8);
    CHECK(info.token_bytes == 2);
    CHECK(info.num_sequences == 4);
    CHECK(info.num_documents == 5); // 0, then one per document (the empty one too)
    CHECK(info.num_tokens == 9);
    CHECK(starts == std::vector<int64_t>{3, 8}); // the empty document adds no boundary
    std::vector<int> out(9);
    data::MegatronTokens(info).read(0, 9, 10, out.data());
    CHECK(out == std::vector<int>{1, 2, 3, 4, 5, 6, 7, 8, 9});
}

TEST_CASE("megatron: the same batches as an llm.c shard of the same tokens, at 1 and 2 ranks") {
    const std::string d = scratch("megatron_same");
    const int V = 300, EOS = 299, B = 2, T = 8;
    const Docs docs = make_docs(160, V, EOS, 7);
    write_megatron(d + "/mega_text_document", megatron_of(docs));
    write_shard(d + "/shard.bin", flat16(docs));
    for (bool shuffle : {false, true})
        for (bool pack : {false, true})
            for (int world : {1, 2})
                for (int accum : {1, 2}) {
                    INFO("shuffle " << shuffle << " pack " << pack << " world " << world
                                    << " accum " << accum);
                    for (int rank = 0; rank < world; rank++) {
                        const auto want = batches(data_cfg(d + "/shard.bin", shuffle, pack, EOS), V,
                                                  B, T, rank, world, accum, 30);
                        // the prefix, as Megatron-LM's --data-path takes it; eos_id is not needed
                        const auto got =
                            batches(data_cfg(d + "/mega_text_document", shuffle, pack, -1), V, B, T,
                                    rank, world, accum, 30);
                        CHECK(got == want);
                    }
                }
    // the .bin or .idx path, or a glob matching both, names the same dataset
    for (const char* v : {"/mega_text_document.bin", "/mega_text_document.idx", "/mega_*"}) {
        INFO(v);
        CHECK(batches(data_cfg(d + v, true, true, -1), V, B, T, 0, 1, 1, 10) ==
              batches(data_cfg(d + "/shard.bin", true, true, EOS), V, B, T, 0, 1, 1, 10));
    }
}

TEST_CASE("megatron: packing takes the documents of the index, with or without an EOS") {
    const std::string d = scratch("megatron_docs");
    const int V = 50, B = 1, T = 6;
    // documents of 2, 3, 1 and 7 tokens, no EOS: boundaries after tokens 2, 5 and 6
    const Docs docs = {{{10, 11}}, {{12}, {13, 14}}, {{15}}, {{16, 17, 18}, {19, 20, 21, 22}}};
    write_megatron(d + "/m", megatron_of(docs));
    const auto got = batches(data_cfg(d + "/m", false, true, -1), V, B, T, 0, 1, 1, 2);
    CHECK(got[0].in == std::vector<int>{10, 11, 12, 13, 14, 15});
    CHECK(got[0].seg == std::vector<int>{0, 0, 1, 1, 1, 2});
    // the target of a document's last token (the next document's first) is not counted
    CHECK(got[0].tg == std::vector<int>{11, -1, 13, 14, -1, -1});
    CHECK(got[1].in == std::vector<int>{16, 17, 18, 19, 20, 21});
    CHECK(got[1].seg == std::vector<int>{0, 0, 0, 0, 0, 0});
    CHECK(got[1].tg == std::vector<int>{17, 18, 19, 20, 21, 22});
    // unpacked: the plain token stream
    const auto plain = batches(data_cfg(d + "/m", false, false, -1), V, B, T, 0, 1, 1, 1);
    CHECK(plain[0].tg == std::vector<int>{11, 12, 13, 14, 15, 16});
    // an EOS id inside a document does not end it (the index decides)
    const auto with_eos = batches(data_cfg(d + "/m", false, true, 13), V, B, T, 0, 1, 1, 1);
    CHECK(with_eos[0].seg == got[0].seg);
    // an llm.c shard in the same glob still needs data.eos_id for packing
    write_shard(d + "/x.bin", std::vector<uint16_t>(20, 3));
    CHECK(has(error_of([&] { batches(data_cfg(d + "/*", false, true, -1), V, B, T, 0, 1, 1, 1); }),
              "data.eos_id = -1"));
}

TEST_CASE("megatron: every integer dtype reads the same ids; bad ids name the file and position") {
    const std::string d = scratch("megatron_dtypes");
    const Docs docs = make_docs(40, 100, 99, 3);
    write_shard(d + "/ref.bin", flat16(docs));
    const auto want = batches(data_cfg(d + "/ref.bin", true, false, -1), 100, 2, 4, 0, 1, 1, 12);
    for (uint8_t code : {1, 2, 3, 4, 5, 8}) {
        INFO("dtype code " << int(code));
        write_megatron(d + "/c" + std::to_string(code), megatron_of(docs, code));
        CHECK(batches(data_cfg(d + "/c" + std::to_string(code), true, false, -1), 100, 2, 4, 0, 1,
                      1, 12) == want);
    }
    // negative (a signed dtype) and out-of-vocabulary ids, found at startup
    for (int64_t bad : {int64_t(-3), int64_t(100)}) {
        MegatronFiles m = megatron_of(docs, 4);
        m.tokens[17] = bad;
        write_megatron(d + "/bad", m);
        core::ErrorKind kind{};
        const std::string e = error_of(
            [&] { batches(data_cfg(d + "/bad", false, false, -1), 100, 2, 4, 0, 1, 1, 1); }, &kind);
        INFO(e);
        CHECK(kind == core::ErrorKind::Format);
        CHECK(has(e, d + "/bad.bin"));
        CHECK(has(e, "position 17"));
        CHECK(has(e, bad < 0 ? "is negative" : ">= model.vocab_size 100"));
    }
}

TEST_CASE("megatron: each broken field of the format is an error naming the file and the field") {
    const std::string d = scratch("megatron_errors");
    const Docs docs = {{{1, 2, 3}, {4}}, {{5, 6}}, {{7, 8, 9}}};
    struct Case {
        const char* name;
        std::function<void(MegatronFiles&)> edit;
        const char* says;
    };
    const std::vector<Case> cases = {
        {"magic", [](MegatronFiles& m) { m.magic = std::string("MMIDIDY\0\0", 9); },
         "header magic 'MMIDIDY"},
        {"version", [](MegatronFiles& m) { m.version = 2; }, "version 2, expected 1"},
        {"float dtype", [](MegatronFiles& m) { m.code = 7; }, "dtype code 7 (float32)"},
        {"unknown dtype", [](MegatronFiles& m) { m.code = 9; },
         "dtype code 9 (not a Megatron dtype code)"},
        {"sequence count", [](MegatronFiles& m) { m.seq_count = 5; },
         "sequence count 5 and document count 4"},
        {"document count", [](MegatronFiles& m) { m.doc_count = 1000000; },
         "sequence count 4 and document count 1000000"},
        {"modes", [](MegatronFiles& m) { m.modes.assign(m.lengths.size(), 0); },
         "mode per sequence (a multimodal dataset)"},
        {"length", [](MegatronFiles& m) { m.lengths[1] = -1; },
         "sequence_lengths[1] = -1 is negative"},
        {"pointer", [](MegatronFiles& m) { m.pointers[2] += 2; },
         "sequence_pointers[2] = 10, but the sequences before it end at byte 8"},
        {"first document", [](MegatronFiles& m) { m.documents[0] = 1; },
         "document_indices[0] = 1; it must be 0"},
        {"document order", [](MegatronFiles& m) { m.documents[2] = 1; },
         "document_indices[2] = 1 is less than the one before (2)"},
        {"document past the end", [](MegatronFiles& m) { m.documents[3] = 9; },
         "document_indices[3] = 9 is past the last sequence"},
        {"no documents", [](MegatronFiles& m) { m.documents.clear(); }, "document count 0"},
        {"bin truncated", [](MegatronFiles& m) { m.tokens.pop_back(); }, "truncated"},
        {"bin longer", [](MegatronFiles& m) { m.tokens.push_back(1); },
         "longer than the index says"},
        {"lengths past the bin", [](MegatronFiles& m) { m.lengths[0] = 100; },
         "sequences 0..0 of its index"},
        {"no tokens", [](MegatronFiles& m) { m = megatron_of({{{}}}); }, "hold no tokens"},
    };
    for (const Case& c : cases) {
        INFO(c.name);
        MegatronFiles m = megatron_of(docs);
        c.edit(m);
        const std::string prefix = d + "/" + std::to_string(&c - cases.data());
        write_megatron(prefix, m);
        core::ErrorKind kind{};
        const std::string e = error_of([&] { data::read_megatron_index(prefix, nullptr); }, &kind);
        INFO(e);
        CHECK(kind == core::ErrorKind::Format);
        CHECK(has(e, prefix + "."));
        CHECK(has(e, c.says));
    }
    // shorter than the header
    {
        std::ofstream(d + "/short.idx", std::ios::binary) << "MMIDIDX";
        std::ofstream(d + "/short.bin", std::ios::binary) << "";
    }
    CHECK(has(error_of([&] { data::read_megatron_index(d + "/short", nullptr); }),
              "shorter than the 34-byte header"));
}

TEST_CASE("megatron: what a data value names (prefix, .bin, .idx, globs, halves, masks)") {
    const std::string d = scratch("megatron_names");
    write_megatron(d + "/a_text_document", megatron_of({{{1, 2}}}));
    write_shard(d + "/b.bin", {1, 2, 3});
    auto names = [](const std::string& v) {
        std::vector<std::string> out;
        for (const config::DataFile& f : config::find_data_files(v, "data.train"))
            out.push_back(f.path + (f.megatron ? " (megatron)" : ""));
        return out;
    };
    const std::string mega = d + "/a_text_document (megatron)";
    CHECK(names(d + "/a_text_document") == std::vector<std::string>{mega});
    CHECK(names(d + "/a_text_document.bin") == std::vector<std::string>{mega});
    CHECK(names(d + "/*.idx") == std::vector<std::string>{mega});
    CHECK(names(d + "/*") == std::vector<std::string>{mega, d + "/b.bin"});
    CHECK(names(d + "/*.bin") == std::vector<std::string>{mega, d + "/b.bin"});
    // an index without its tokens; tokens without their index are an llm.c shard's business
    std::filesystem::copy_file(d + "/a_text_document.idx", d + "/lone.idx");
    CHECK(has(error_of([&] { names(d + "/lone.idx"); }), "has no token file '" + d + "/lone.bin'"));
    CHECK(has(error_of([&] { names(d + "/lone"); }), "has no token file"));
    std::filesystem::copy_file(d + "/a_text_document.bin", d + "/half.bin");
    CHECK(has(error_of([&] { names(d + "/half"); }),
              "'" + d + "/half.bin' exists but '" + d + "/half.idx' does not"));
    // an index that is not a regular file: said, not read as an llm.c shard's missing index
    std::filesystem::copy_file(d + "/a_text_document.bin", d + "/f.bin");
    REQUIRE(::mkfifo((d + "/f.idx").c_str(), 0644) == 0);
    CHECK(has(error_of([&] { names(d + "/f.bin"); }), "its index '" + d + "/f.idx' is a FIFO"));
    // a Megatron dataset has no loss masks: require refuses, auto with masked shards refuses
    config::DataConfig c = data_cfg(d + "/a_text_document", false, false, -1);
    c.loss_mask = "require";
    CHECK(has(error_of([&] { data::DataLoader(c, data::Split::Train, 10, 1, 1, 0, 1); }),
              "format has no loss masks"));
}
