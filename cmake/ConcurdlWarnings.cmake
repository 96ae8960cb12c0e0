# Warnings and sanitizer/arch flags, as interface targets so each target opts in once.
add_library(concurdl_warnings INTERFACE)
# Designated initializers are how experiments are declared; fields left out take their
# defaults on purpose, so -Wmissing-field-initializers (part of -Wextra) is switched off.
target_compile_options(concurdl_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-missing-field-initializers>)

# CONCURDL_EXTRA_FLAGS: every flag added here, recorded in each result's provenance.
set(CONCURDL_SANITIZER_NOTE "")
set(CONCURDL_EXTRA_FLAGS "")
if(CONCURDL_SANITIZER STREQUAL "thread")
  # UBSan rides along (clang accepts thread and undefined together), so that the preset CI runs
  # on every submission also sees undefined behaviour.
  add_compile_options(-fsanitize=thread,undefined -g -O1)
  set(CONCURDL_EXTRA_FLAGS "-fsanitize=thread,undefined -g -O1")
  add_link_options(-fsanitize=thread,undefined)
  set(CONCURDL_SANITIZER_NOTE ", ThreadSanitizer + UBSan")
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    message(WARNING "TSan with g++ reports false races inside libgomp; use the tsan preset (clang + libomp)")
  endif()
elseif(CONCURDL_SANITIZER STREQUAL "address")
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -g)
  set(CONCURDL_EXTRA_FLAGS "-fsanitize=address,undefined -fno-omit-frame-pointer -g")
  add_link_options(-fsanitize=address,undefined)
  set(CONCURDL_SANITIZER_NOTE ", AddressSanitizer + UBSan")
elseif(NOT CONCURDL_SANITIZER STREQUAL "")
  message(FATAL_ERROR "CONCURDL_SANITIZER='${CONCURDL_SANITIZER}': use '', 'thread' or 'address'")
endif()

if(CONCURDL_NATIVE)
  include(CheckCXXCompilerFlag)
  check_cxx_compiler_flag(-march=native CONCURDL_HAS_MARCH_NATIVE)
  if(CONCURDL_HAS_MARCH_NATIVE)
    add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-march=native>)
    string(APPEND CONCURDL_EXTRA_FLAGS " -march=native")
  endif()
endif()

function(concurdl_warnings target)
  target_link_libraries(${target} PRIVATE concurdl_warnings)
endfunction()
