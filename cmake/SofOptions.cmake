# Build options: CUDA detection (SOF_CUDA=AUTO|ON|OFF), warnings and sanitizers.
# Sets SOF_HAVE_CUDA and the interface target sof_flags that every target of ours links.
include(CheckLanguage)

set(SOF_HAVE_CUDA OFF)
if(NOT SOF_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 90)
    endif()
    enable_language(CUDA)
    set(CMAKE_CUDA_STANDARD 17)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    set(SOF_HAVE_CUDA ON)
  elseif(SOF_CUDA STREQUAL "ON")
    message(FATAL_ERROR "SOF_CUDA=ON but no CUDA compiler (nvcc) was found. "
                        "Install the CUDA Toolkit or configure with -DSOF_CUDA=OFF.")
  endif()
endif()

add_library(sof_flags INTERFACE)
# -ffp-contract=off: GCC fuses a*b+c into one FMA by default (C++ too, -std=c++20 or not) wherever
# the ISA has FMA: always on aarch64 (Grace), in AVX-512 function clones on x86. A fused operation
# rounds once, so the same source gave other bits on Grace than on x86, and the AVX-512F clone of
# the attention's exp_row (72 fused operations) other bits than its AVX2 and baseline clones. Off
# for all our host code, C++ and nvcc's host side (tests/core/test_build_flags.cpp); device code
# keeps nvcc's -fmad where no twin needs it.
target_compile_options(sof_flags INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -ffp-contract=off>
  $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-ffp-contract=off>
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${SOF_WERROR}>>:-Werror>
  $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra>
  $<$<AND:$<COMPILE_LANGUAGE:CUDA>,$<BOOL:${SOF_WERROR}>>:-Werror=all-warnings>)
if(SOF_HAVE_CUDA)
  target_compile_definitions(sof_flags INTERFACE SOF_HAVE_CUDA=1)
endif()

if(SOF_SANITIZE STREQUAL "address")
  set(_san -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
elseif(SOF_SANITIZE STREQUAL "thread")
  set(_san -fsanitize=thread -fno-omit-frame-pointer)
elseif(NOT SOF_SANITIZE STREQUAL "")
  message(FATAL_ERROR "SOF_SANITIZE='${SOF_SANITIZE}': use '', 'address' or 'thread'")
endif()
if(_san)
  target_compile_options(sof_flags INTERFACE $<$<COMPILE_LANGUAGE:C,CXX>:${_san}>)
  target_link_options(sof_flags INTERFACE ${_san})
endif()
# libFuzzer (tests/fuzz/README.md): every target of ours gets the coverage instrumentation; the
# harnesses link libFuzzer's main (-fsanitize=fuzzer) instead of the seeded driver. clang only.
if(SOF_LIBFUZZER)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "SOF_LIBFUZZER=ON needs clang (CC=clang CXX=clang++)")
  endif()
  target_compile_options(sof_flags INTERFACE $<$<COMPILE_LANGUAGE:C,CXX>:-fsanitize=fuzzer-no-link>)
endif()
