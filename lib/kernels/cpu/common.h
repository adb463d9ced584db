// Shared constants of the CPU twins: the fixed work split that keeps every result bitwise
// independent of the OpenMP thread count.
#pragma once

namespace sof::kernels::cpu {

constexpr int kChanBlock = 64; // channels per task in the column-sum loops (dw, db, dwte)

} // namespace sof::kernels::cpu
