// Internal: whether this build can emit the AVX512_BF16 kernels, and the target attribute they
// are compiled with whatever -march says (gemm_bf16.cpp, gemm_bf16_peak.cpp; bf16.cpp checks it).
#pragma once

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#define CONCURDL_BF16_KERNEL 1
#define CONCURDL_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))
#else
#define CONCURDL_BF16_KERNEL 0
#endif
