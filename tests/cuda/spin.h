// A kernel that keeps a stream busy for a known device time, for the GPU tests that must fail
// when an event wait is missing: work queued behind it lands that much later (tests/cuda/spin.cu).
#pragma once

namespace sof::test {

// Enqueues on `stream` (a cudaStream_t) one thread that spins until `us` microseconds of the
// GPU's global timer have passed. Throws std::runtime_error when the launch fails.
void spin_on_stream(void* stream, double us);

} // namespace sof::test
