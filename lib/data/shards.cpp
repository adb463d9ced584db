// llm.c token shard files: glob expansion, header/size validation for uint16 and uint32 shards,
// token id range checks. Every failure is a core::Error naming the file, the reason and the fix.
#include "data/shards.h"

#include <glob.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

#include "config/data_files.h"
#include "core/error.h"
#include "core/input_file.h"

namespace sof::data {

namespace {

struct FileCloser {
    void operator()(std::FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

// Regular files only, opened without blocking (a FIFO matched by the glob must not hang the run).
File open_or_fail(const std::string& path, uint64_t* size) {
    std::string why;
    const int fd = core::open_regular(path, size, &why);
    if (fd < 0)
        SOF_FAIL(Io, "token shard %s: cannot open: %s (check the path in data.train/data.val)",
                 path.c_str(), why.c_str());
    File f(::fdopen(fd, "rb"));
    if (!f) {
        const int e = errno;
        ::close(fd);
        SOF_FAIL(Io, "token shard %s: cannot open: %s", path.c_str(), std::strerror(e));
    }
    return f;
}

// Shard files are little-endian; on a big-endian host the values read are swapped in place.
template <typename T> T swap_bytes(T v) {
    T r = 0;
    for (size_t i = 0; i < sizeof(T); i++)
        r = static_cast<T>((r << 8) | ((v >> (8 * i)) & 0xff));
    return r;
}
template <typename T> void from_little_endian(T* v, size_t n) {
    if constexpr (std::endian::native == std::endian::big)
        for (size_t i = 0; i < n; i++)
            v[i] = swap_bytes(v[i]);
}

const char* width_name(int token_bytes) {
    return token_bytes == 2 ? "uint16" : "uint32";
}

template <typename T> int64_t first_out_of_vocab_impl(const T* tokens, int64_t n, int vocab) {
    if (vocab < 1) return n > 0 ? 0 : -1;
    // every T is < 2^(8*sizeof T); vocab (an int) may already cover them all
    if (static_cast<uint64_t>(vocab) > static_cast<uint64_t>(T(~T(0)))) return -1;
    const T limit = static_cast<T>(vocab - 1);
    T m = 0;
    for (int64_t i = 0; i < n; i++) // branch-free max: vectorized by the compiler
        m = std::max(m, tokens[i]);
    if (m <= limit) return -1;
    for (int64_t i = 0; i < n; i++)
        if (tokens[i] > limit) return i;
    return -1; // not reached
}

// Reads the shard's tokens into dst (n of them, starting at token `first`), converts them from
// little endian and checks them against vocab.
template <typename T>
void read_tokens(std::FILE* f, const std::string& path, T* dst, int64_t n, int64_t first,
                 int64_t ntok, int vocab) {
    size_t got = std::fread(dst, sizeof(T), static_cast<size_t>(n), f);
    if (got != static_cast<size_t>(n))
        SOF_FAIL(Io, "token shard %s: read failed at token %lld of %lld: %s", path.c_str(),
                 static_cast<long long>(first + static_cast<int64_t>(got)),
                 static_cast<long long>(ntok),
                 std::ferror(f) ? std::strerror(errno) : "unexpected end of file (truncated?)");
    from_little_endian(dst, static_cast<size_t>(n));
    const int64_t bad = first_out_of_vocab_impl(dst, n, vocab);
    if (bad < 0) return;
    const int64_t pos = first + bad;
    const unsigned long long id = dst[bad];
    SOF_FAIL(Format,
             "token shard %s: token %llu at position %lld (%s, byte offset %lld) is >= "
             "model.vocab_size %d: the data was tokenized with a larger vocabulary than the "
             "model's; re-tokenize it with the model's tokenizer, or, if the model really has "
             "more tokens, set model.vocab_size to at least %llu",
             path.c_str(), id, static_cast<long long>(pos), width_name(sizeof(T)),
             static_cast<long long>(4 * kShardHeaderInts + pos * static_cast<int64_t>(sizeof(T))),
             vocab, id + 1);
}

} // namespace

int64_t first_out_of_vocab(const uint16_t* tokens, int64_t n, int vocab) {
    return first_out_of_vocab_impl(tokens, n, vocab);
}

int64_t first_out_of_vocab(const uint32_t* tokens, int64_t n, int vocab) {
    return first_out_of_vocab_impl(tokens, n, vocab);
}

std::vector<std::string> expand_glob(const std::string& pattern, const std::string& key) {
    // what the value names (throws naming the problem: no match, a FIFO, a half Megatron pair)
    const std::vector<config::DataFile> inputs = config::find_data_files(pattern, key);
    std::vector<std::string> files;
    glob_t g;
    std::memset(&g, 0, sizeof(g));
    if (::glob(pattern.c_str(), GLOB_NOSORT, nullptr, &g) == 0) {
        for (size_t i = 0; i < g.gl_pathc; i++) {
            std::string p = g.gl_pathv[i];
            std::error_code ec;
            if (!std::filesystem::is_directory(p, ec)) files.push_back(p);
        }
    }
    globfree(&g);
    if (files.empty()) // a Megatron prefix: its .idx and .bin
        for (const config::DataFile& f : inputs)
            for (const std::string& p : config::data_file_paths(f))
                files.push_back(p);
    std::sort(files.begin(), files.end());
    return files;
}

ShardInfo read_shard_header(const std::string& path) {
    uint64_t size = 0;
    File f = open_or_fail(path, &size);
    int32_t header[kShardHeaderInts];
    size_t got = std::fread(header, sizeof(int32_t), kShardHeaderInts, f.get());
    if (got != static_cast<size_t>(kShardHeaderInts))
        SOF_FAIL(Format,
                 "token shard %s: file is too short for the 1024-byte llm.c header (%zu bytes "
                 "read): the file is truncated or not an llm.c token shard",
                 path.c_str(), got * sizeof(int32_t));
    if constexpr (std::endian::native == std::endian::big)
        for (int32_t& h : header)
            h = static_cast<int32_t>(swap_bytes(static_cast<uint32_t>(h)));
    const int32_t magic = header[0], version = header[1];
    ShardInfo info;
    if (magic == kShardMagic) {
        info.token_bytes = 2;
    } else if (magic == kShardMagic32) {
        info.token_bytes = 4;
    } else {
        const bool bin = path.size() > 4 && path.compare(path.size() - 4, 4, ".bin") == 0;
        const char* hint = magic == 20240326 ? " (that is an llm.c model checkpoint, not a "
                                               "token shard)"
                           : bin ? " (if it is a Megatron-LM dataset's .bin, its .idx must be "
                                   "beside it)"
                                 : "";
        SOF_FAIL(Format,
                 "token shard %s: bad magic %d, expected %d (uint16 tokens) or %d (uint32 "
                 "tokens)%s: not an llm.c token shard; write shards with llm.c's data scripts "
                 "or scripts/make_shard.py",
                 path.c_str(), magic, kShardMagic, kShardMagic32, hint);
    }
    const int32_t want = info.token_bytes == 2 ? kShardVersion : kShardVersion32;
    if (version != want) {
        const bool other = version == (info.token_bytes == 2 ? kShardVersion32 : kShardVersion);
        SOF_FAIL(Format,
                 "token shard %s: unknown version %d for magic %d, expected version %d (%s "
                 "tokens)%s; re-create the shard with scripts/make_shard.py or a current llm.c "
                 "data script",
                 path.c_str(), version, magic, want, width_name(info.token_bytes),
                 other ? core::strfmt(" (version %d goes with magic %d: the header mixes the "
                                      "uint16 and uint32 formats)",
                                      version, info.token_bytes == 2 ? kShardMagic32 : kShardMagic)
                             .c_str()
                       : "");
    }
    info.num_tokens = header[2];
    if (info.num_tokens <= 0)
        SOF_FAIL(Format, "token shard %s: header declares %lld tokens; a shard needs at least 1",
                 path.c_str(), static_cast<long long>(info.num_tokens));
    const uintmax_t n = static_cast<uintmax_t>(info.num_tokens);
    const uintmax_t expected = 4 * kShardHeaderInts + info.token_bytes * n;
    if (size != expected) {
        const int other_bytes = 6 - info.token_bytes;
        const bool fits_other = size == 4 * kShardHeaderInts + other_bytes * n;
        SOF_FAIL(Format,
                 "token shard %s: header declares %lld %s tokens (%ju bytes with the header) "
                 "but the file has %ju bytes: the file is %s%s; re-create or re-download it",
                 path.c_str(), static_cast<long long>(info.num_tokens),
                 width_name(info.token_bytes), expected, static_cast<uintmax_t>(size),
                 size < expected ? "truncated" : "longer than declared (corrupt header?)",
                 fits_other ? core::strfmt(" (the size fits %lld %s tokens: the header's "
                                           "magic/version do not match the token width)",
                                           static_cast<long long>(info.num_tokens),
                                           width_name(other_bytes))
                                  .c_str()
                            : "");
    }
    return info;
}

ShardInfo read_shard(const std::string& path, int vocab, ShardTokens* out) {
    const ShardInfo info = read_shard_header(path);
    const int64_t ntok = info.num_tokens;
    File f = open_or_fail(path, nullptr);
    if (std::fseek(f.get(), 4 * kShardHeaderInts, SEEK_SET) != 0)
        SOF_FAIL(Io, "token shard %s: cannot seek past the header: %s", path.c_str(),
                 std::strerror(errno));
    ShardTokens scratch;
    ShardTokens& dst = out ? *out : scratch;
    dst.token_bytes = info.token_bytes;
    const int64_t kChunk = int64_t(1) << 20;
    // the whole shard when keeping it, else one chunk at a time (constant memory)
    const size_t cap = static_cast<size_t>(out ? ntok : std::min(kChunk, ntok));
    if (info.token_bytes == 2) {
        dst.u32 = {};
        dst.u16.resize(cap);
    } else {
        dst.u16 = {};
        dst.u32.resize(cap);
    }
    for (int64_t pos = 0; pos < ntok; pos += kChunk) {
        const int64_t n = std::min(kChunk, ntok - pos);
        const size_t at = static_cast<size_t>(out ? pos : 0);
        if (info.token_bytes == 2)
            read_tokens(f.get(), path, dst.u16.data() + at, n, pos, ntok, vocab);
        else
            read_tokens(f.get(), path, dst.u32.data() + at, n, pos, ntok, vocab);
    }
    return info;
}

} // namespace sof::data
