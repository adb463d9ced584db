// `superoffload generate`: text in, text out with a model (Hugging Face directory, checkpoint or
// llm.c file) on the CPU or a CUDA GPU through the kernel seam: prefill + KV-cache decoding.
#include <mpi.h>
#include <omp.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "ckpt/checkpoint.h"
#include "ckpt/hf.h"
#include "ckpt/json.h"
#include "ckpt/llmc.h"
#include "commands.h"
#include "config/config.h"
#include "config/deck.h"
#include "core/error.h"
#include "device/device.h"
#include "model/model.h"
#include "model/sample.h"
#include "zero/shard.h"
#include "cli.h"
#include "tools.h"

namespace sof::app {

namespace {

const char* kGenerateUsage =
    "usage: superoffload generate (--hf DIR | --checkpoint DIR | --llmc FILE)\n"
    "                             (--prompt TEXT | --chat FILE | --prompt-ids 1,2,3)\n"
    "                             [--tokenizer HF_DIR] [--max-tokens N] [--temperature T]\n"
    "                             [--top-k K] [--top-p P] [--seed S] [--ignore-eos] [--json]\n"
    "                             [--device auto|host|cuda]\n"
    "  Continues a prompt with the model (one process), with a KV cache.\n"
    "  --hf DIR          a Hugging Face model directory (config.json + safetensors)\n"
    "  --checkpoint DIR  a step directory or a checkpoint root (its newest step)\n"
    "  --llmc FILE       an llm.c GPT-2 fp32 file\n"
    "  --prompt TEXT     the prompt, tokenized as AutoTokenizer(TEXT).input_ids\n"
    "  --chat FILE       JSON list of {\"role\", \"content\"} messages, rendered by the\n"
    "                    tokenizer's chat template with the generation prompt\n"
    "  --prompt-ids IDS  the prompt as token ids; prints the new ids (a tokenizer, when there is\n"
    "                    one, only gives the stop ids)\n"
    "  --tokenizer DIR   the Hugging Face directory with tokenizer.json (default: --hf, or the\n"
    "                    checkpoint's model.init_from); scripts/hf_tokenize.py uses it\n"
    "  --max-tokens N    new tokens at most (default 64); fewer when a stop token (the\n"
    "                    tokenizer's EOS, generation_config.json's eos_token_id) comes first\n"
    "  --temperature T   default 1; 0 = greedy (argmax)\n"
    "  --top-k K         sample among the K most likely (default 0: all)\n"
    "  --top-p P         sample among the most likely tokens of mass P (default 1: all)\n"
    "  --seed S          sampling seed (default 0): the same seed gives the same text\n"
    "  --ignore-eos      do not stop at a stop token\n"
    "  --json            print {\"prompt_ids\", \"ids\", \"text\", ...} instead of the text\n"
    "  --device D        where the model runs: host (the CPU twins), cuda (a GPU, fp32), auto\n"
    "                    (the default: cuda when this build has CUDA and a GPU is visible)\n";

struct GenArgs {
    std::string hf, checkpoint, llmc, prompt, chat, prompt_ids, tokenizer, device = "auto";
    bool has_prompt = false, ignore_eos = false, json = false, help = false;
    int max_tokens = 64, top_k = 0;
    float temperature = 1.0f, top_p = 1.0f;
    uint64_t seed = 0;
};

[[noreturn]] void usage_fail(const std::string& what) {
    core::throw_error(core::ErrorKind::Usage, "generate: " + what + "\n" + kGenerateUsage);
}

double number(const std::string& opt, const std::string& v) {
    char* end = nullptr;
    const double x = std::strtod(v.c_str(), &end);
    if (v.empty() || *end != '\0') usage_fail(opt + " needs a number, got '" + v + "'");
    return x;
}

GenArgs parse(int argc, char** argv) {
    GenArgs a;
    CliParser p({kGenerateUsage, "generate: unknown argument '%s'",
                 [](const std::string& opt) { return "generate: " + opt + " needs a value"; }});
    std::string max_tokens, temperature, top_k, top_p, seed;
    for (auto [name, dst] : {std::pair{"--hf", &a.hf},
                             {"--checkpoint", &a.checkpoint},
                             {"--llmc", &a.llmc},
                             {"--prompt", &a.prompt},
                             {"--chat", &a.chat},
                             {"--prompt-ids", &a.prompt_ids},
                             {"--tokenizer", &a.tokenizer},
                             {"--max-tokens", &max_tokens},
                             {"--temperature", &temperature},
                             {"--top-k", &top_k},
                             {"--top-p", &top_p},
                             {"--seed", &seed},
                             {"--device", &a.device}})
        p.option(name, dst);
    p.flag("--ignore-eos", &a.ignore_eos);
    p.flag("--json", &a.json);
    p.flag("-h,--help", &a.help);
    const std::vector<std::string> pos = p.parse(argc, argv);
    if (!pos.empty()) usage_fail("unknown argument '" + pos[0] + "'");
    a.has_prompt = p.count("--prompt") > 0;
    if (p.count("--max-tokens")) {
        const double x = number("--max-tokens", max_tokens);
        if (x < 1 || x > 1e7 || x != static_cast<int>(x)) usage_fail("--max-tokens must be >= 1");
        a.max_tokens = static_cast<int>(x);
    }
    if (p.count("--temperature")) {
        a.temperature = static_cast<float>(number("--temperature", temperature));
        if (a.temperature < 0) usage_fail("--temperature must be >= 0");
    }
    if (p.count("--top-k")) {
        const double x = number("--top-k", top_k);
        if (x < 0 || x != static_cast<int>(x)) usage_fail("--top-k must be an integer >= 0");
        a.top_k = static_cast<int>(x);
    }
    if (p.count("--top-p")) {
        a.top_p = static_cast<float>(number("--top-p", top_p));
        if (!(a.top_p > 0 && a.top_p <= 1)) usage_fail("--top-p must be in (0, 1]");
    }
    if (p.count("--seed")) {
        const double x = number("--seed", seed);
        if (x < 0) usage_fail("--seed must be >= 0");
        a.seed = static_cast<uint64_t>(x);
    }
    if (a.device != "auto" && a.device != "host" && a.device != "cuda")
        usage_fail("--device must be auto, host or cuda, got '" + a.device + "'");
    if (a.help) return a;
    if ((!a.hf.empty()) + (!a.checkpoint.empty()) + (!a.llmc.empty()) != 1)
        usage_fail("give the model: exactly one of --hf, --checkpoint, --llmc");
    if (a.has_prompt + (!a.chat.empty()) + (!a.prompt_ids.empty()) != 1)
        usage_fail("give the prompt: exactly one of --prompt, --chat, --prompt-ids");
    return a;
}

std::vector<int> parse_ids(const std::string& s) {
    std::vector<int> ids;
    size_t i = 0;
    while (i < s.size()) {
        const size_t j = s.find(',', i);
        const std::string t = s.substr(i, j == std::string::npos ? std::string::npos : j - i);
        char* end = nullptr;
        const long v = std::strtol(t.c_str(), &end, 10);
        if (t.empty() || *end != '\0' || v < 0 || v > INT32_MAX)
            usage_fail("--prompt-ids: '" + t + "' is not a token id");
        ids.push_back(static_cast<int>(v));
        if (j == std::string::npos) break;
        i = j + 1;
    }
    return ids;
}

std::string join_ids(const std::vector<int>& ids) {
    std::string s;
    for (size_t i = 0; i < ids.size(); i++)
        s.append(i ? "," : "").append(std::to_string(ids[i]));
    return s;
}

// The model's config and full fp32 parameters; `init_from`: the checkpoint's model.init_from.
void load_model(const GenArgs& a, model::ArchConfig* cfg, std::vector<float>* params,
                std::string* init_from) {
    if (!a.hf.empty()) {
        *cfg = ckpt::read_hf_config(a.hf);
        const model::ParamLayout lay = model::make_layout(*cfg);
        params->assign(lay.num_params, 0.0f);
        ckpt::import_hf(a.hf, lay, zero::make_shard_map(lay, 1, 0), params->data());
    } else if (!a.llmc.empty()) {
        *cfg = ckpt::read_llmc_header(a.llmc);
        const model::ParamLayout lay = model::make_layout(*cfg);
        params->assign(lay.num_params, 0.0f);
        ckpt::import_llmc(a.llmc, lay, params->data());
    } else {
        std::string dir = a.checkpoint;
        std::error_code ec;
        if (!std::filesystem::exists(std::filesystem::path(dir) / "manifest.json", ec)) {
            dir = ckpt::find_latest(a.checkpoint);
            if (dir.empty())
                SOF_FAIL(Io,
                         "generate: %s holds no complete checkpoint (no step_N directory with a "
                         "manifest.json)",
                         a.checkpoint.c_str());
        }
        ckpt::Manifest m;
        ckpt::load_params(dir, &m, params);
        *cfg = m.model;
        if (params->size() != model::make_layout(*cfg).num_params)
            SOF_FAIL(Format, "checkpoint %s holds %zu params but its model needs %zu", dir.c_str(),
                     params->size(), model::make_layout(*cfg).num_params);
        *init_from = config::parse_deck_text(m.deck_yaml, dir + "/deck.yaml").model.init_from;
    }
}

// Where the model runs: `device` null for the CPU twins (the model's own host device), else a
// CUDA device with a compute stream and the model's fp32 weights copied into its memory once.
struct ModelPlace {
    std::unique_ptr<device::Device> device;
    std::unique_ptr<device::Stream> stream;
    float* weights = nullptr; // device memory (num_params), or null

    ModelPlace() = default;
    ModelPlace(const ModelPlace&) = delete;
    ModelPlace& operator=(const ModelPlace&) = delete;
    ~ModelPlace() {
        if (weights) device->free(weights);
    }
};

// --device auto|host|cuda: auto is cuda when a GPU is visible (device::make_device's rule).
void place_model(const std::string& choice, const std::vector<float>& params, ModelPlace* mp) {
    if (choice == "host") return;
    config::DeviceConfig dc;
    dc.type = choice == "cuda" ? config::DeviceType::Cuda : config::DeviceType::Auto;
    try {
        mp->device = device::make_device(dc, 0, nullptr);
    } catch (const core::Error& e) {
        SOF_FAIL(Config, "generate --device %s: %s (in generate: --device host runs on the CPU)",
                 choice.c_str(), e.what());
    }
    if (mp->device->host_accessible()) { // auto without a GPU: the CPU path
        mp->device.reset();
        return;
    }
    mp->stream = mp->device->create_stream("generate");
    const size_t bytes = params.size() * sizeof(float);
    mp->weights = static_cast<float*>(mp->device->alloc(bytes, "the model's weights (fp32)"));
    mp->device->copy(mp->weights, params.data(), bytes, device::CopyKind::HostToDevice,
                     *mp->stream);
    mp->device->synchronize(*mp->stream);
}

} // namespace

int cmd_generate(int argc, char** argv) {
    const GenArgs a = parse(argc, argv);
    if (a.help) {
        std::fputs(kGenerateUsage, stdout);
        return 0;
    }
    int world = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    if (world != 1)
        usage_fail("runs in one process (started with " + std::to_string(world) +
                   " ranks); run it without mpirun");

    model::ArchConfig cfg;
    std::vector<float> params;
    std::string init_from;
    load_model(a, &cfg, &params, &init_from);

    // the tokenizer: for text prompts and for the text of the reply
    std::string tok = a.tokenizer;
    if (tok.empty()) tok = !a.hf.empty() ? a.hf : init_from;
    if (!tok.empty() && !ckpt::is_hf_dir(tok) &&
        !std::filesystem::exists(std::filesystem::path(tok) / "tokenizer.json"))
        tok.clear();
    const bool text = a.prompt_ids.empty();
    if (text && tok.empty())
        usage_fail("--prompt / --chat need a tokenizer: give --tokenizer HF_DIR (the model's "
                   "Hugging Face directory), or the prompt as --prompt-ids");
    const std::string script = sh_quote(script_path("hf_tokenize.py")) + " ";
    std::vector<int> prompt, stop;
    if (text) {
        const std::string out = run_capture(
            script + "encode --tokenizer " + sh_quote(tok) +
                (a.has_prompt ? " --text " + sh_quote(a.prompt) : " --chat " + sh_quote(a.chat)),
            "generate: tokenizing the prompt with scripts/hf_tokenize.py");
        const std::string src = "hf_tokenize.py encode";
        const ckpt::Json j = ckpt::json_parse(out, src);
        for (const ckpt::Json& v : ckpt::json_arr(j, "ids", src))
            prompt.push_back(v.get<int>());
        for (const ckpt::Json& v : ckpt::json_arr(j, "stop", src))
            stop.push_back(v.get<int>());
    } else {
        prompt = parse_ids(a.prompt_ids);
        if (!tok.empty() && !a.ignore_eos) {
            const std::string out =
                run_capture(script + "encode --tokenizer " + sh_quote(tok) + " --text ''",
                            "generate: reading the stop ids");
            // (the parsed document must outlive the loop: a temporary in the range expression
            // would die before it, C++20)
            const std::string src = "hf_tokenize.py encode";
            const ckpt::Json j = ckpt::json_parse(out, src);
            for (const ckpt::Json& v : ckpt::json_arr(j, "stop", src))
                stop.push_back(v.get<int>());
        }
    }
    if (a.ignore_eos) stop.clear();
    if (prompt.empty()) usage_fail("the prompt has no tokens");

    const int max_T =
        std::min<long>(cfg.max_seq_len, static_cast<long>(prompt.size()) + a.max_tokens);
    if (static_cast<int>(prompt.size()) >= cfg.max_seq_len)
        SOF_FAIL(Usage, "generate: the prompt has %zu tokens, the model's context is %d",
                 prompt.size(), cfg.max_seq_len);
    ModelPlace place; // before the model: freed after it
    place_model(a.device, params, &place);
    model::ModelOptions mopts;
    mopts.device = place.device.get(); // null: the CPU twins on the model's own host device
    mopts.stream = place.stream.get();
    const auto m = model::make_model(cfg, mopts, 1, max_T);
    const model::ParamLayout lay = model::make_layout(cfg);
    model::FlatWeights w(lay, place.weights ? place.weights : params.data());
    const std::string where = place.device
                                  ? place.device->describe()
                                  : std::to_string(omp_get_max_threads()) + " CPU thread(s)";
    model::SamplingParams sp;
    sp.temperature = a.temperature;
    sp.top_k = a.top_k;
    sp.top_p = a.top_p;
    const model::GenerateResult r =
        model::generate(*m, w, prompt, a.max_tokens, max_T, sp, a.seed, stop);

    std::string reply; // ids in, ids out: no text for --prompt-ids
    if (text)
        reply = run_capture(script + "decode --tokenizer " + sh_quote(tok) + " --ids " +
                                join_ids(r.ids),
                            "generate: decoding the reply with scripts/hf_tokenize.py");
    const double tps = r.ids.size() > 1 ? (r.ids.size() - 1) / std::max(r.decode_s, 1e-9) : 0.0;
    if (a.json) {
        std::printf("{\"prompt_ids\": [%s], \"ids\": [%s], \"text\": %s, \"stopped\": %s, "
                    "\"prefill_s\": %.6f, \"decode_s\": %.6f, \"tokens_per_s\": %.3f, "
                    "\"device\": \"%s\"}\n",
                    join_ids(prompt).c_str(), join_ids(r.ids).c_str(),
                    ckpt::json_quote(reply).c_str(), r.stopped ? "true" : "false", r.prefill_s,
                    r.decode_s, tps, place.device ? "cuda" : "host");
    } else {
        std::printf("%s\n", text ? reply.c_str() : join_ids(r.ids).c_str());
        std::fprintf(stderr,
                     "generate: %zu prompt tokens (%.3f s), %zu new tokens (%.1f tok/s, %s)%s\n",
                     prompt.size(), r.prefill_s, r.ids.size(), tps, where.c_str(),
                     r.stopped ? ", ended by a stop token" : "");
    }
    std::fflush(stdout);
    return 0;
}

} // namespace sof::app
