// Whether this build runs under ThreadSanitizer, written once. Code that synchronises inside a
// library not built with it (oneTBB's libtbb) or with fences TSan does not model
// (moodycamel::ConcurrentQueue) cannot be checked there: TSan reports races it cannot see are
// ordered. Such tests skip under it, saying so, and run in the other builds; stress tests take
// fewer rounds under it (each access is ~5-15x slower).
#pragma once

namespace concurdl {

#if defined(__SANITIZE_THREAD__)
inline constexpr bool kThreadSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
inline constexpr bool kThreadSanitizer = true;
#else
inline constexpr bool kThreadSanitizer = false;
#endif
#else
inline constexpr bool kThreadSanitizer = false;
#endif

}  // namespace concurdl
