#!/usr/bin/env bash
# Sanitizer builds of the tests (CPU-only): ASan+UBSan over every CPU test and a bounded fuzz run of
# each harness (tests/fuzz, label fuzz: a fixed number of mutations each, the same work on any
# machine), TSan over the threaded engine tests, the job queue and the pipelined checkpoint
# reader. Run by .ci/run after the main test command.
set -euo pipefail
cd "$(dirname "$0")/.."
# -O1 -g1: what the sanitizers' own docs advise (line tables keep the reports' file:line). GCC 12
# with ASan+UBSan at -O2 takes 2x longer to compile than at -O1 (lib/ckpt/hf.cpp: 140 s vs 70 s;
# ASan alone 59 s): at -O2 this build was the longest step of CI. The -O2 warnings are the plain
# build's (-Werror there).
DBG=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG"
     -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG")
scripts/setup.sh build-asan -DSOF_SANITIZE=address -DSOF_CUDA=OFF "${DBG[@]}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Open MPI's own allocations are reported as leaks at exit; leaks in our code are found by the
# per-test LeakSanitizer runs of the non-MPI tests.
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# Left out under ASan (all run in the plain pass of scripts/run_tests.sh): the references whose
# time is PyTorch/transformers/tokenizers in Python, the C++ paths they reach being the ones the
# unit, e2e and mpi tests run here too (hf_transformers, generate_reference, moe_reference,
# megatron_reference, prepare_data*, llama_reference), and the long-sequence scale runs (minutes
# each; longseq_gpt2_np4 and longseq_llama_np4 stay), the planner's Fig. 13 search (~60 whole
# plans of 20-60B models: the code of test_planner's other cases), and the style checks.
ASAN_SKIP='^(check_format|test_kernels_structure|test_kernels_model_seam|test_hf_transformers|test_generate_reference|test_moe_reference|test_megatron_reference|test_prepare_data|test_prepare_datasets|test_llama_reference|test_longseq_(8192|4m-gh200|2m-alps)_np2|test_planner_fig13)$'
ctest --test-dir build-asan --output-on-failure -j 2 -L "unit|optim|engine|reference|e2e|mpi|fuzz" \
  -E "$ASAN_SKIP"

# TSan: only what its tests need (the threaded engine, the job queue, the checkpoint reader), so
# CI stays inside its time; the dependencies were installed by the ASan setup above
cmake -S . -B build-tsan -DSOF_SANITIZE=thread -DSOF_CUDA=OFF "${DBG[@]}"
cmake --build build-tsan -j "$(nproc)" --target test_job_queue test_engine test_memory_plan \
  test_engine_gpt2 test_capacity test_peak_rss test_ckpt
# libgomp is not built with TSan: its barriers are invisible, so every OpenMP region would be
# reported as a race. The engine's own threads (streams, optimizer worker) are std::threads that TSan
# sees; OpenMP runs with one thread here (the tests' decks ask for runtime.threads <= 1).
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" OMP_NUM_THREADS=1
# the engine's configuration sweeps run every third combination under TSan (20-50x their plain
# time there); the plain and ASan runs take every one (tests/engine/engine_test_util.h)
export SOF_TEST_SWEEP_STRIDE=3
ctest --test-dir build-tsan --output-on-failure -j 2 -L "engine"
# the checkpoint import's pipelined reader (a reader thread and the caller sharing a ring of buffers)
build-tsan/bin/test_ckpt -tc="read_ranges*"
