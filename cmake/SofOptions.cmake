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
target_compile_options(sof_flags INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra>
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
