# concurdl_add_chapter(NN-topic SOURCES ... EXPERIMENTS ... [CUDA_SOURCES ...] [TESTS ...]
#                      [RACE_DEMOS ...] [LIBS ...] [EXPERIMENT_LIBS ...] [CHAPTERS NN ...]
#                      [LABELS ...] [REQUIRES cap ...] [OPTIONAL cap ...])
#
# Capabilities (cap): cuda, nccl, mpi, uring. REQUIRES: the chapter is built only where all of
# them were found (the configure summary says which chapter was left out and why). OPTIONAL:
# the chapter builds either way and links each one where found. Either way every chapter target
# gets CONCURDL_HAVE_CUDA/NCCL/MPI/URING defined as 1 or 0 (per target, not globally), so code
# tests `#if CONCURDL_HAVE_MPI`. CUDA_SOURCES (.cu) are compiled only where CUDA was found.
# CHAPTERS: the earlier chapters whose code this one uses (05 for 06 and 07, 01 for 08); the
# chapter is left out, and said so, where one of them is not built.
#
# One call per chapter. It makes:
#   concurdl_chNN   the code students read (SOURCES, CUDA_SOURCES): a static library, which
#                   later chapters (CHAPTERS) and the tests link; an interface library where the
#                   code is all headers. It links concurdl::core, not the harness, so the code
#                   students read cannot include the harness's headers (the build says so). Its
#                   include directories: include/ and the chapter folder (the stubs are
#                   "exercises/student_*.hpp"). Nothing in it registers itself: a static
#                   library drops what nothing calls.
#   concurdl_chNN_experiments  what registers itself with the program at static
#                   initialisation (EXPERIMENTS: experiments, exercises, micro-benchmarks, the
#                   train command's backends and modes, commands), with the harness and the
#                   libraries only they need (EXPERIMENT_LIBS: a peer such as Gloo): an OBJECT
#                   library, so that the linker keeps every registration. The `concurdl`
#                   program links every chapter's.
#   chNN_tests      the chapter's GoogleTest binary, on concurdl_chNN alone (reference and
#                   student implementations through one typed suite); each test gets a timeout
#                   and the labels chNN + LABELS. `concurdl exercise chNN` runs this binary.
#   chNN_race_demos deliberate data-race demonstrations (RACE_DEMOS sources), labelled
#                   race-demo so that the tsan test preset leaves them out.
set_property(GLOBAL PROPERTY CONCURDL_CHAPTER_TARGETS "")
set(CONCURDL_TEST_TIMEOUT 120 CACHE STRING "Per-test timeout in seconds")

# Give every test that gtest_discover_tests found in `target` the labels `labels` (a list).
# Passing them as gtest_discover_tests(PROPERTIES LABELS "a;b") does not work: the list is split
# on the way and only "a" arrives. So a script that CTest includes after the discovered tests'
# own sets them.
function(concurdl_label_discovered target labels)
  set(script ${CMAKE_CURRENT_BINARY_DIR}/${target}_labels.cmake)
  file(WRITE ${script}
       "foreach(t IN LISTS ${target}_TESTS)\n"
       "  set_tests_properties(\"\${t}\" PROPERTIES LABELS \"${labels}\")\n"
       "endforeach()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${script})
endfunction()

# The imported target that brings capability `cap`, in `out` ("" for cuda: CUDA sources and
# CUDA::cudart are added apart).
function(concurdl_capability_libs cap out)
  if(cap STREQUAL "mpi")
    set(${out} MPI::MPI_C PARENT_SCOPE)
  elseif(cap STREQUAL "nccl")
    set(${out} NCCL::nccl CUDA::cudart PARENT_SCOPE)
  elseif(cap STREQUAL "uring")
    set(${out} PkgConfig::URING PARENT_SCOPE)
  elseif(cap STREQUAL "cuda")
    set(${out} CUDA::cudart PARENT_SCOPE)
  else()
    message(FATAL_ERROR "concurdl_add_chapter: unknown capability '${cap}' (cuda, nccl, mpi, uring)")
  endif()
endfunction()

# concurdl_add_mpi_test(NAME name TARGET exe RANKS n [ARGS arg ...] [LABELS label ...]
#                       [TIMEOUT s] [WRAPPER cmd ...] [SKIP_REGULAR_EXPRESSION re])
# A test that runs `exe` on n MPI ranks as the launcher does: mpiexec -n n with
# CONCURDL_MPIEXEC_PREFLAGS (--allow-run-as-root by default, for root) and OpenMPI's
# oversubscription on (4 ranks on a 2-core machine). ARGS go to the program. WRAPPER is a
# command the whole mpiexec line is passed to (a script that checks how the job ends). The test
# claims n processors, so that ctest -j counts the ranks; TIMEOUT: CONCURDL_TEST_TIMEOUT unless
# given.
function(concurdl_add_mpi_test)
  cmake_parse_arguments(T "" "NAME;TARGET;RANKS;TIMEOUT;SKIP_REGULAR_EXPRESSION"
                        "ARGS;LABELS;WRAPPER" ${ARGN})
  if(NOT T_NAME OR NOT T_TARGET OR NOT T_RANKS)
    message(FATAL_ERROR "concurdl_add_mpi_test: NAME, TARGET and RANKS are required")
  endif()
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT ${CONCURDL_TEST_TIMEOUT})
  endif()
  separate_arguments(preflags UNIX_COMMAND "${CONCURDL_MPIEXEC_PREFLAGS}")
  add_test(NAME ${T_NAME}
           COMMAND ${T_WRAPPER} ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${T_RANKS} ${preflags}
                   ${MPIEXEC_PREFLAGS} $<TARGET_FILE:${T_TARGET}> ${T_ARGS} ${MPIEXEC_POSTFLAGS})
  set_tests_properties(${T_NAME} PROPERTIES LABELS "${T_LABELS}" PROCESSORS ${T_RANKS}
                       TIMEOUT ${T_TIMEOUT} ENVIRONMENT "OMPI_MCA_rmaps_base_oversubscribe=1")
  if(T_SKIP_REGULAR_EXPRESSION)
    set_tests_properties(${T_NAME} PROPERTIES
                         SKIP_REGULAR_EXPRESSION "${T_SKIP_REGULAR_EXPRESSION}")
  endif()
endfunction()

function(concurdl_add_chapter folder)
  cmake_parse_arguments(CH "" ""
    "SOURCES;EXPERIMENTS;CUDA_SOURCES;TESTS;RACE_DEMOS;LIBS;EXPERIMENT_LIBS;CHAPTERS;LABELS;REQUIRES;OPTIONAL"
    ${ARGN})
  string(REGEX MATCH "^[0-9]+" num "${folder}")
  if(num STREQUAL "")
    message(FATAL_ERROR "concurdl_add_chapter(${folder}): the folder must be named NN-topic")
  endif()
  if(NOT CH_EXPERIMENTS)
    message(FATAL_ERROR "concurdl_add_chapter(${folder}): a chapter registers its experiments "
                        "(EXPERIMENTS experiments.cpp ...)")
  endif()
  set(missing "")
  foreach(cap IN LISTS CH_REQUIRES)
    concurdl_capability_libs(${cap} unused)  # checks the name
    string(TOUPPER ${cap} CAP)
    if(NOT CONCURDL_HAVE_${CAP})
      list(APPEND missing ${cap})
    endif()
  endforeach()
  set(uses "")
  foreach(earlier IN LISTS CH_CHAPTERS)
    if(TARGET concurdl_ch${earlier})
      list(APPEND uses concurdl_ch${earlier})
    else()
      list(APPEND missing "chapter ${earlier}")
    endif()
  endforeach()
  if(missing)
    string(REPLACE ";" ", " missing "${missing}")
    set_property(GLOBAL APPEND PROPERTY CONCURDL_CHAPTERS_OFF "${folder} (needs ${missing})")
    return()
  endif()

  set(target concurdl_ch${num})
  set(sources ${CH_SOURCES})
  if(CONCURDL_HAVE_CUDA)
    list(APPEND sources ${CH_CUDA_SOURCES})
  endif()
  if(sources)
    add_library(${target} STATIC ${sources})
    set(scope PUBLIC)
    concurdl_warnings(${target})
  else()
    add_library(${target} INTERFACE)
    set(scope INTERFACE)
  endif()
  target_include_directories(${target} ${scope} ${CMAKE_CURRENT_SOURCE_DIR}/include
                             ${CMAKE_CURRENT_SOURCE_DIR})
  target_link_libraries(${target} ${scope} concurdl::core ${uses} ${CH_LIBS})
  foreach(cap cuda nccl mpi uring)
    string(TOUPPER ${cap} CAP)
    if(CONCURDL_HAVE_${CAP} AND (cap IN_LIST CH_REQUIRES OR cap IN_LIST CH_OPTIONAL))
      concurdl_capability_libs(${cap} libs)
      target_link_libraries(${target} ${scope} ${libs})
    endif()
    if(CONCURDL_HAVE_${CAP})
      target_compile_definitions(${target} ${scope} CONCURDL_HAVE_${CAP}=1)
    else()
      target_compile_definitions(${target} ${scope} CONCURDL_HAVE_${CAP}=0)
    endif()
  endforeach()

  add_library(${target}_experiments OBJECT ${CH_EXPERIMENTS})
  target_link_libraries(${target}_experiments PUBLIC concurdl::harness ${target} ${CH_EXPERIMENT_LIBS})
  concurdl_warnings(${target}_experiments)
  set_property(GLOBAL APPEND PROPERTY CONCURDL_CHAPTER_TARGETS ${target}_experiments)
  set_property(GLOBAL APPEND PROPERTY CONCURDL_CHAPTERS ${folder})

  if(CH_TESTS AND CONCURDL_TESTS)
    add_executable(ch${num}_tests ${CH_TESTS})
    target_link_libraries(ch${num}_tests PRIVATE ${target} GTest::gtest_main)
    concurdl_warnings(ch${num}_tests)
    gtest_discover_tests(ch${num}_tests
      PROPERTIES TIMEOUT ${CONCURDL_TEST_TIMEOUT}
      DISCOVERY_TIMEOUT 60)
    set(labels ch${num} ${CH_LABELS})
    concurdl_label_discovered(ch${num}_tests "${labels}")
  endif()
  if(CH_RACE_DEMOS AND CONCURDL_TESTS)
    add_executable(ch${num}_race_demos ${CH_RACE_DEMOS})
    target_link_libraries(ch${num}_race_demos PRIVATE ${target} GTest::gtest_main)
    concurdl_warnings(ch${num}_race_demos)
    gtest_discover_tests(ch${num}_race_demos
      PROPERTIES TIMEOUT ${CONCURDL_TEST_TIMEOUT}
      DISCOVERY_TIMEOUT 60)
    concurdl_label_discovered(ch${num}_race_demos "ch${num};race-demo")
  endif()
endfunction()
