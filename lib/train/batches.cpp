// Run details (see batches.h): data.eos_id from the shards' prepare.json or the model's
// config.json, and duration text for the step log.
#include "train/batches.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <filesystem>

#include "ckpt/fileio.h"
#include "config/data_files.h"
#include "ckpt/json.h"
#include "core/error.h"
#include "core/strfmt.h"

namespace sof::train {

namespace {

// eos_token_id of a JSON file (an int, or the first of a list); -1 when the file or key is
// missing or null. A file that is not JSON is an error naming it; so is a path that is not a
// regular file (read through core::InputFile: a FIFO is refused, never waited on).
int eos_in(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0 && (errno == ENOENT || errno == ENOTDIR)) return -1;
    const ckpt::Json j =
        ckpt::json_parse(ckpt::read_text(path, "eos_token_id file (data.pack)"), path);
    if (!j.is_object() || !j.contains("eos_token_id")) return -1;
    ckpt::Json v = j["eos_token_id"];
    if (v.is_array() && !v.empty()) v = v[0];
    if (!v.is_number_integer()) return -1;
    const int64_t id = v.get<int64_t>();
    return id >= 0 && id <= INT32_MAX ? static_cast<int>(id) : -1;
}

} // namespace

int resolve_eos_id(const config::Config& cfg) {
    const config::DataConfig& d = cfg.data;
    if (!d.pack || d.eos_id >= 0) return d.eos_id;
    // a Megatron dataset's documents are in its index: only llm.c shards and the built-in corpus
    // need the separator
    bool need = false;
    std::string first; // the first input of data.train
    for (const std::string* v : {&d.train, &d.val}) {
        if (*v == "builtin") {
            need = true;
            continue;
        }
        config::DataFilesError err;
        const std::vector<config::DataFile> files = config::find_data_files(*v, "data", &err);
        if (files.empty()) need = true; // the loader reports the problem
        for (const config::DataFile& f : files)
            need = need || !f.megatron;
        if (v == &d.train && !files.empty()) first = files[0].path;
    }
    if (!need) return -1;
    std::vector<std::string> looked;
    if (!first.empty())
        looked.push_back((std::filesystem::path(first).parent_path() / "prepare.json").string());
    if (!cfg.model.init_from.empty() && std::filesystem::is_directory(cfg.model.init_from))
        looked.push_back((std::filesystem::path(cfg.model.init_from) / "config.json").string());
    for (const std::string& p : looked) {
        const int id = eos_in(p);
        if (id >= 0) return id;
    }
    std::string where;
    for (const std::string& p : looked)
        where += (where.empty() ? "" : ", ") + p;
    SOF_FAIL(Config,
             "data.pack = true with data.eos_id = -1 (auto), but no EOS id was found (looked for "
             "eos_token_id in: %s); set data.eos_id to the id that ends each document",
             where.empty() ? "nothing: builtin data and no Hugging Face model.init_from"
                           : where.c_str());
}

std::string format_duration(double seconds) {
    if (!std::isfinite(seconds) || seconds < 0) return "?";
    if (seconds < 60) return core::strfmt("%.1fs", seconds);
    const long long s = std::llround(seconds);
    if (s < 3600) return core::strfmt("%lldm%02llds", s / 60, s % 60);
    return core::strfmt("%lldh%02lldm%02llds", s / 3600, s / 60 % 60, s % 60);
}

} // namespace sof::train
