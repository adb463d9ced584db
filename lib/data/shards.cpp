// llm.c token shard files: glob expansion, header/size validation, token range checks.
// Every failure is a core::Error naming the file, the reason and how to fix it.
#include "data/shards.h"

#include <glob.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

#include "core/error.h"

namespace sof::data {

namespace {

struct FileCloser {
    void operator()(std::FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

File open_or_fail(const std::string& path) {
    File f(std::fopen(path.c_str(), "rb"));
    if (!f)
        SOF_FAIL(Io, "token shard %s: cannot open: %s (check the path in data.train/data.val)",
                 path.c_str(), std::strerror(errno));
    return f;
}

// Checks tokens[0..n) < vocab; `first` is the index of tokens[0] within the shard.
void check_tokens(const std::string& path, const uint16_t* tokens, int64_t n, int64_t first,
                  int vocab) {
    for (int64_t i = 0; i < n; i++) {
        if (tokens[i] >= vocab)
            SOF_FAIL(Format,
                     "token shard %s: token %d at position %lld is >= vocab_size %d: the shard "
                     "was made with a larger vocabulary; set model.vocab_size to at least %d or "
                     "re-tokenize the data",
                     path.c_str(), static_cast<int>(tokens[i]), static_cast<long long>(first + i),
                     vocab, static_cast<int>(tokens[i]) + 1);
    }
}

} // namespace

std::vector<std::string> expand_glob(const std::string& pattern, const std::string& key) {
    std::vector<std::string> files;
    glob_t g;
    std::memset(&g, 0, sizeof(g));
    int rc = ::glob(pattern.c_str(), GLOB_NOSORT, nullptr, &g);
    if (rc == 0) {
        for (size_t i = 0; i < g.gl_pathc; i++) {
            std::string p = g.gl_pathv[i];
            std::error_code ec;
            if (!std::filesystem::is_directory(p, ec)) files.push_back(p);
        }
    }
    globfree(&g);
    if (files.empty()) {
        std::error_code ec;
        std::string cwd = std::filesystem::current_path(ec).string();
        SOF_FAIL(Config,
                 "%s = '%s' matches no token shard file (paths are relative to the working "
                 "directory %s); fix the path or glob, or use 'builtin' for the built-in corpus",
                 key.c_str(), pattern.c_str(), cwd.c_str());
    }
    std::sort(files.begin(), files.end());
    return files;
}

int64_t read_shard_header(const std::string& path) {
    File f = open_or_fail(path);
    int32_t header[kShardHeaderInts];
    size_t got = std::fread(header, sizeof(int32_t), kShardHeaderInts, f.get());
    if (got != static_cast<size_t>(kShardHeaderInts))
        SOF_FAIL(Format,
                 "token shard %s: file is too short for the 1024-byte llm.c header (%zu bytes "
                 "read): the file is truncated or not an llm.c token shard",
                 path.c_str(), got * sizeof(int32_t));
    if (header[0] != kShardMagic) {
        const char* hint = header[0] == 20240326 ? " (that is an llm.c model checkpoint, not "
                                                   "a token shard)"
                                                 : "";
        SOF_FAIL(Format,
                 "token shard %s: bad magic %d, expected %d%s: not an llm.c token shard; write "
                 "shards with llm.c's data scripts or scripts/make_shard.py",
                 path.c_str(), header[0], kShardMagic, hint);
    }
    if (header[1] != kShardVersion)
        SOF_FAIL(Format,
                 "token shard %s: unsupported version %d, expected %d (uint16 tokens); "
                 "re-create the shard with a current llm.c data script",
                 path.c_str(), header[1], kShardVersion);
    int64_t ntok = header[2];
    if (ntok <= 0)
        SOF_FAIL(Format, "token shard %s: header declares %lld tokens; a shard needs at least 1",
                 path.c_str(), static_cast<long long>(ntok));
    std::error_code ec;
    uintmax_t size = std::filesystem::file_size(path, ec);
    if (ec)
        SOF_FAIL(Io, "token shard %s: cannot get the file size: %s", path.c_str(),
                 ec.message().c_str());
    const uintmax_t expected = 4 * kShardHeaderInts + 2 * static_cast<uintmax_t>(ntok);
    if (size != expected)
        SOF_FAIL(Format,
                 "token shard %s: header declares %lld tokens (%ju bytes with the header) but "
                 "the file has %ju bytes: the file is %s; re-create or re-download it",
                 path.c_str(), static_cast<long long>(ntok), expected, size,
                 size < expected ? "truncated" : "longer than declared (corrupt header?)");
    return ntok;
}

int64_t read_shard(const std::string& path, int vocab, std::vector<uint16_t>* out) {
    const int64_t ntok = read_shard_header(path);
    File f = open_or_fail(path);
    if (std::fseek(f.get(), 4 * kShardHeaderInts, SEEK_SET) != 0)
        SOF_FAIL(Io, "token shard %s: cannot seek past the header: %s", path.c_str(),
                 std::strerror(errno));
    std::vector<uint16_t> chunk;
    if (out) out->resize(static_cast<size_t>(ntok));
    const int64_t kChunk = int64_t(1) << 20;
    for (int64_t pos = 0; pos < ntok; pos += kChunk) {
        const int64_t n = std::min(kChunk, ntok - pos);
        uint16_t* dst;
        if (out) {
            dst = out->data() + pos;
        } else {
            chunk.resize(static_cast<size_t>(n));
            dst = chunk.data();
        }
        size_t got = std::fread(dst, sizeof(uint16_t), static_cast<size_t>(n), f.get());
        if (got != static_cast<size_t>(n))
            SOF_FAIL(Io, "token shard %s: read failed at token %lld of %lld: %s", path.c_str(),
                     static_cast<long long>(pos + static_cast<int64_t>(got)),
                     static_cast<long long>(ntok),
                     std::ferror(f.get()) ? std::strerror(errno) : "unexpected end of file");
        check_tokens(path, dst, n, pos, vocab);
    }
    return ntok;
}

} // namespace sof::data
