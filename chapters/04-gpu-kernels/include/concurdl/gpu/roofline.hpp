// The GPU's limits as arithmetic, in plain C++ (tested on the CPU): how many blocks of a kernel
// fit on one streaming multiprocessor (occupancy) and why no more, the device's peak FLOP/s
// from its compute capability, SM count and clock, and the roofline time of a kernel's declared
// bytes and FLOPs (Trial::bound, the harness's roofline_time). device.hpp fills these in from the
// device (cudaDeviceGetAttribute, a measured device-to-device copy); the experiments record the
// occupancy of every kernel and draw the roofline beside every measurement.
#pragma once

#include <string>

namespace concurdl::gpu {

// What one SM holds (cudaDeviceGetAttribute on the device; sm_limits() for known ones).
struct SmLimits {
  int max_threads = 2048;             // resident threads per SM
  int max_blocks = 32;                // resident blocks per SM
  int registers = 65536;              // 32-bit registers per SM
  int shared_bytes = 167936;          // shared memory per SM usable by blocks
  int reserved_shared_per_block = 0;  // the runtime's own, per resident block (1 KB since sm_80)
  int warp_size = 32;
  int register_unit = 256;  // registers are given to a warp in units of this many
  int shared_unit = 128;    // shared memory is given to a block in units of this many
};
// The limits of compute capability major.minor (the CUDA occupancy calculator's table): 7.0,
// 7.5, 8.0, 8.6, 8.9, 9.0, 10.0, 12.0. Throws std::invalid_argument for another.
SmLimits sm_limits(int major, int minor);

// What a kernel asks of an SM per block (cudaFuncGetAttributes and its launch configuration).
struct KernelResources {
  int threads = 256;     // per block
  int registers = 32;    // per thread
  int shared_bytes = 0;  // per block, static + dynamic
};

struct Occupancy {
  int blocks = 0;          // resident blocks per SM
  int warps = 0;           // resident warps per SM
  int max_warps = 0;       // the SM's maximum
  int threads = 0;         // per block
  double fraction = 0;     // warps / the SM's maximum
  std::string limited_by;  // "threads", "blocks", "registers" or "shared memory"
  // "50% (4 blocks of 256 threads: 32 of 64 warps; limited by registers)"
  std::string describe() const;
};
// What cudaOccupancyMaxActiveBlocksPerMultiprocessor answers, computed: the fewest blocks any
// one resource allows. Throws std::invalid_argument for a block that cannot run at all (more
// threads, registers or shared memory than an SM has).
Occupancy occupancy(const SmLimits& sm, const KernelResources& k);

// Single-precision lanes per SM (FMA units, two FLOPs a clock each): 64 on 7.x and 8.0, 128 on
// 8.6, 8.7, 8.9, 9.0, 10.x and 12.x. 0 when unknown.
int fp32_lanes_per_sm(int major, int minor);
// Dense FP16-input, FP32-accumulate tensor-core FLOPs per clock per SM: 1024 on 7.0 (V100),
// 2048 on 8.0 (A100), 4096 on 9.0 (H100). 0 when unknown (the consumer parts run FP32
// accumulation at a rate their data sheets give per product, not per architecture).
int tensor_flops_per_clock_per_sm(int major, int minor);

// A device as the roofline needs it (device.hpp: device_roofline() queries and measures it).
struct GpuRoofline {
  std::string name;  // "NVIDIA H100 80GB HBM3"
  int major = 0, minor = 0, sms = 0;
  double clock_hz = 0;  // the SM clock the peaks assume (its maximum)
  double l2_bytes = 0;
  double theoretical_bytes_per_s = 0;  // 2 x memory clock x bus width
  double copy_bytes_per_s = 0;         // measured: a device-to-device copy, read + written
  double fp32_flops_per_s = 0;         // sms x fp32 lanes x 2 x clock
  double tensor_flops_per_s = 0;       // sms x tensor FLOPs per clock x clock; 0: unknown
  // "NVIDIA H100 (sm_90, 132 SMs at 1.98 GHz): copy 3.0 TB/s measured (theoretical 3.35),
  // FP32 66.9 TFLOP/s, FP16 tensor 1070 TFLOP/s": peaks at the maximum SM clock, above NVIDIA's
  // datasheet figures (989 TFLOP/s dense FP16 for an H100/H200 SXM, quoted at a lower clock)
  std::string describe() const;
};
// The peaks of a device from its figures; copy_bytes_per_s as given.
GpuRoofline make_roofline(std::string name, int major, int minor, int sms, double clock_hz,
                          double l2_bytes, double theoretical_bytes_per_s, double copy_bytes_per_s);

}  // namespace concurdl::gpu
