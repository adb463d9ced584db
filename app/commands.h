// Subcommands of the superoffload program; each lives in its own cmd_<name>.cpp.
// A command returns the process exit code and throws sof::core::Error for reportable failures.
#pragma once

namespace sof::app {

int cmd_train(int argc, char** argv);           // superoffload train DECK [--set k=v ...]
int cmd_check(int argc, char** argv);           // superoffload check DECK [--set k=v ...]
int cmd_eval(int argc, char** argv);            // superoffload eval [DECK] [--checkpoint D|--hf D]
int cmd_generate(int argc, char** argv);        // superoffload generate --hf D --prompt TEXT
int cmd_plan(int argc, char** argv);            // superoffload plan DECK [--hardware FILE]
int cmd_bench(int argc, char** argv);           // superoffload bench adam|... [options]
int cmd_bench_import(int argc, char** argv);    // superoffload bench import --create DIR | DIR
int cmd_bench_attention(int argc, char** argv); // superoffload bench attention [--seq T ...]
int cmd_bench_train(int argc, char** argv);     // superoffload bench train DECK [--steps N ...]
int cmd_bench_moe(int argc, char** argv);       // superoffload bench moe [--tokens N ...]
int cmd_export(int argc, char** argv);          // superoffload export --llmc OUT.bin CHECKPOINT_DIR
int cmd_topo(int argc, char** argv);            // superoffload topo

} // namespace sof::app
