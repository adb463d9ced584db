// data.train / data.val values -> llm.c shards and Megatron-LM datasets (see data_files.h): glob,
// loss masks and directories skipped, Megatron .bin/.idx pairs, what a non-regular match is.
#include "config/data_files.h"

#include <glob.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "core/input_file.h"
#include "core/strfmt.h"

namespace sof::config {

namespace {

namespace fs = std::filesystem;

bool ends_with(const std::string& s, const char* tail) {
    const std::string t(tail);
    return s.size() > t.size() && s.compare(s.size() - t.size(), t.size(), t) == 0;
}

std::vector<std::string> glob_all(const std::string& pattern) {
    std::vector<std::string> out;
    glob_t g{};
    if (::glob(pattern.c_str(), GLOB_NOSORT, nullptr, &g) == 0)
        for (size_t i = 0; i < g.gl_pathc; i++)
            out.push_back(g.gl_pathv[i]);
    globfree(&g);
    std::sort(out.begin(), out.end());
    return out;
}

std::string cwd_note(const std::string& path) {
    if (fs::path(path).is_absolute()) return "";
    std::error_code ec;
    const fs::path cwd = fs::current_path(ec);
    return ec ? std::string() : " (looked in " + cwd.string() + ")";
}

std::vector<DataFile> fail(DataFilesError* err, core::ErrorKind kind, std::string message) {
    err->kind = kind;
    err->message = std::move(message);
    return {};
}

} // namespace

std::vector<DataFile> find_data_files(const std::string& value, const std::string& key,
                                      DataFilesError* err) {
    *err = DataFilesError{};
    std::vector<std::string> matches = glob_all(value);
    if (matches.empty()) { // a Megatron prefix, as Megatron-LM's --data-path takes it
        matches = glob_all(value + ".idx");
        if (matches.empty() && !glob_all(value + ".bin").empty())
            return fail(err, core::ErrorKind::Config,
                        core::strfmt("%s: '%s.bin' exists but '%s.idx' does not: a Megatron-LM "
                                     "indexed dataset is both files (the index .idx and the "
                                     "tokens .bin, as tools/preprocess_data.py writes them)",
                                     key.c_str(), value.c_str(), value.c_str()));
    }
    std::set<std::string> megatron;
    std::vector<DataFile> out;
    size_t masks = 0;
    for (const std::string& m : matches) {
        if (ends_with(m, ".mask")) { // a loss mask travels with its shard
            masks++;
            continue;
        }
        const std::string kind = core::path_kind(m);
        if (kind == "a directory") continue;
        if (!kind.empty())
            return fail(
                err, core::ErrorKind::Io,
                core::strfmt("%s: '%s'%s is %s, not a regular file; give token shard "
                             "files (or a Megatron dataset's .bin/.idx files)",
                             key.c_str(), m.c_str(),
                             m == value ? ""
                                        : core::strfmt(" (matched by '%s')", value.c_str()).c_str(),
                             kind.c_str()));
        const bool idx = ends_with(m, ".idx"), bin = ends_with(m, ".bin");
        const std::string prefix = (idx || bin) ? m.substr(0, m.size() - 4) : std::string();
        if (idx) {
            const std::string b = prefix + ".bin", bk = core::path_kind(b);
            if (!bk.empty())
                return fail(err, bk == "missing" ? core::ErrorKind::Config : core::ErrorKind::Io,
                            core::strfmt("%s: Megatron dataset '%s': its index '%s' has no "
                                         "token file '%s' beside it (%s)",
                                         key.c_str(), prefix.c_str(), m.c_str(), b.c_str(),
                                         bk == "missing" ? "no such file"
                                                         : (bk + ", not a regular file").c_str()));
        }
        const std::string idx_kind = bin ? core::path_kind(prefix + ".idx") : "";
        if (bin && !idx_kind.empty() && idx_kind != "missing")
            return fail(err, core::ErrorKind::Io,
                        core::strfmt("%s: Megatron dataset '%s': its index '%s.idx' is %s, not "
                                     "a regular file",
                                     key.c_str(), prefix.c_str(), prefix.c_str(),
                                     idx_kind.c_str()));
        if (idx || (bin && idx_kind.empty())) {
            if (megatron.insert(prefix).second) out.push_back({prefix, true});
            continue;
        }
        out.push_back({m, false});
    }
    if (!out.empty()) {
        std::sort(out.begin(), out.end(),
                  [](const DataFile& a, const DataFile& b) { return a.path < b.path; });
        return out;
    }
    if (masks > 0)
        return fail(err, core::ErrorKind::Config,
                    core::strfmt("%s = '%s' matches only loss-mask files (*.mask), no token shard",
                                 key.c_str(), value.c_str()));
    return fail(err, core::ErrorKind::Config,
                core::strfmt("%s: no file matches '%s'%s; give 'builtin', a glob of llm.c token "
                             "shards, or a Megatron-LM dataset (its path prefix, or its "
                             ".bin/.idx files)",
                             key.c_str(), value.c_str(), cwd_note(value).c_str()));
}

std::vector<DataFile> find_data_files(const std::string& value, const std::string& key) {
    DataFilesError err;
    std::vector<DataFile> out = find_data_files(value, key, &err);
    if (!err.message.empty()) core::throw_error(err.kind, err.message);
    return out;
}

std::vector<std::string> data_file_paths(const DataFile& f) {
    if (!f.megatron) return {f.path};
    return {f.path + ".idx", f.path + ".bin"};
}

} // namespace sof::config
