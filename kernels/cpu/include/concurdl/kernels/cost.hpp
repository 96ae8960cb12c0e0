// What a kernel call costs, declared next to the kernel: the floating-point operations it does
// and the bytes it must move to or from memory at least (each input read once, each output
// written once: the compulsory traffic a roofline's arithmetic intensity is drawn from).
#pragma once

#include <cstddef>

namespace concurdl::kernels {

struct Cost {
  double flops = 0;
  double bytes = 0;
  double intensity() const { return bytes > 0 ? flops / bytes : 0; }
};

}  // namespace concurdl::kernels
