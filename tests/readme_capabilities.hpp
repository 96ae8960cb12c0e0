// Whether this build registers everything a chapter's README describes. A build without MPI (the
// sanitizer presets: OpenMPI is not instrumented) does not register chapter 05's MPI
// experiments or their claims, which the README's generated blocks list: those blocks can only
// be compared in a build that has them (the default one, which CI runs first).
#pragma once

#include <string>

inline bool readme_needs_what_this_build_lacks(const std::string& chapter) {
#if defined(CONCURDL_HAVE_MPI) && !CONCURDL_HAVE_MPI
  return chapter == "05-data-parallel";
#else
  return chapter.empty();
#endif
}
