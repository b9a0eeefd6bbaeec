// What the device-loss suites run to lose the device on purpose, as a driver reset would:
// the trap leaves the context with a sticky error (CUDA_ERROR_LAUNCH_FAILED on every later
// call), which only a new process recovers from.
extern "C" __global__ void lose_device() { asm volatile("trap;"); }
