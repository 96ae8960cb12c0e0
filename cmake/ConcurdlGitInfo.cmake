# Run at every build (cmake -P): write git_info.hpp with the commit and dirty flag of the source
# tree being built, so results name the code the program was built from. configure_file only
# touches the header when its content changes, so an unchanged tree rebuilds nothing.
# Inputs: SOURCE_DIR, OUTPUT, GIT_EXECUTABLE.
set(CONCURDL_BUILD_GIT_COMMIT "unknown")
set(CONCURDL_BUILD_GIT_DIRTY "-1")  # unknown
if(GIT_EXECUTABLE)
  execute_process(COMMAND "${GIT_EXECUTABLE}" rev-parse HEAD WORKING_DIRECTORY "${SOURCE_DIR}"
                  OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET
                  RESULT_VARIABLE rc)
  if(rc EQUAL 0)
    set(CONCURDL_BUILD_GIT_COMMIT "${commit}")
    execute_process(COMMAND "${GIT_EXECUTABLE}" status --porcelain --untracked-files=no
                    WORKING_DIRECTORY "${SOURCE_DIR}" OUTPUT_VARIABLE status ERROR_QUIET
                    RESULT_VARIABLE rc)
    if(rc EQUAL 0)
      if(status STREQUAL "")
        set(CONCURDL_BUILD_GIT_DIRTY "0")
      else()
        set(CONCURDL_BUILD_GIT_DIRTY "1")
      endif()
    endif()
  endif()
endif()
file(WRITE "${OUTPUT}.in" [=[
// Generated at build time by cmake/ConcurdlGitInfo.cmake: the source tree this program was built from.
#pragma once
namespace concurdl::build {
inline constexpr const char* git_commit = "@CONCURDL_BUILD_GIT_COMMIT@";
inline constexpr int git_dirty = @CONCURDL_BUILD_GIT_DIRTY@;  // 1 dirty, 0 clean, -1 unknown
}  // namespace concurdl::build
]=])
configure_file("${OUTPUT}.in" "${OUTPUT}" @ONLY)
