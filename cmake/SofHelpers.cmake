# sof_module(NAME SOURCES ... [CUDA_SOURCES ...] DEPS ...): one static library per lib/ module.
# sof_test(NAME SOURCES ... DEPS ... [RANKS n] [LABELS ...]): a doctest executable registered with ctest.

function(sof_module name)
  cmake_parse_arguments(M "" "" "SOURCES;CUDA_SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  set(_srcs ${M_SOURCES})
  if(SOF_HAVE_CUDA AND M_CUDA_SOURCES)
    list(APPEND _srcs ${M_CUDA_SOURCES})
  endif()
  add_library(sof_${name} STATIC ${_srcs})
  target_include_directories(sof_${name} PUBLIC ${CMAKE_SOURCE_DIR}/lib)
  target_link_libraries(sof_${name} PUBLIC ${M_DEPS} PRIVATE sof_flags ${M_PRIVATE_DEPS})
  if(SOF_HAVE_CUDA AND M_CUDA_SOURCES)
    set_target_properties(sof_${name} PROPERTIES CUDA_SEPARABLE_COMPILATION OFF)
    target_link_libraries(sof_${name} PUBLIC CUDA::cudart)
  endif()
endfunction()

# sof_test_launch_defs(TARGET): what tests/launch.h needs (the MPI launcher as shell words, the
# emulator prefix of a cross build, the host optimizer plugin's name).
function(sof_test_launch_defs target)
  target_compile_definitions(${target} PRIVATE SOF_MPIEXEC="${SOF_MPIEXEC_SHELL}"
    SOF_EXEC_PREFIX="${SOF_EXEC_PREFIX_SHELL}" SOF_HOST_PLUGIN="${SOF_HOST_PLUGIN}")
endfunction()

function(sof_test name)
  cmake_parse_arguments(T "" "RANKS;TIMEOUT" "SOURCES;DEPS;LABELS;ARGS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_DEPS} sof_doctest sof_flags)
  target_include_directories(${name} PRIVATE ${CMAKE_SOURCE_DIR}/tests ${CMAKE_SOURCE_DIR}/lib)
  target_compile_definitions(${name} PRIVATE
    SOF_SOURCE_DIR="${CMAKE_SOURCE_DIR}" SOF_BINARY_DIR="${CMAKE_BINARY_DIR}"
    SOF_PLUGIN_DIR="${SOF_PLUGIN_DIR}")
  sof_test_launch_defs(${name})
  if(T_RANKS)
    sof_mpi_launch(_launch ${T_RANKS})
    add_test(NAME ${name} COMMAND ${_launch} $<TARGET_FILE:${name}> ${T_ARGS})
    set_tests_properties(${name} PROPERTIES ENVIRONMENT
      "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMP_NUM_THREADS=1")
  else()
    add_test(NAME ${name} COMMAND ${name} ${T_ARGS})
  endif()
  if(T_TIMEOUT)
    set_tests_properties(${name} PROPERTIES TIMEOUT ${T_TIMEOUT})
  endif()
  if(T_LABELS)
    set_tests_properties(${name} PROPERTIES LABELS "${T_LABELS}")
  endif()
endfunction()
