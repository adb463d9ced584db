// CPU twin of bias_grad.h: column sums over channel blocks, rows in order within each column
// (deterministic for any thread count).
#include "kernels/bias_grad.h"

#include <algorithm>

#include "kernels/cpu/common.h"

namespace sof::kernels::cpu {

void bias_grad(float* dbias, const float* dout, int N, int OC) {
    const int nblk = (OC + kChanBlock - 1) / kChanBlock;
#pragma omp parallel for schedule(static)
    for (int blk = 0; blk < nblk; blk++) {
        const int c0 = blk * kChanBlock, c1 = std::min(OC, c0 + kChanBlock);
        for (int n = 0; n < N; n++) {
            const float* d = dout + static_cast<size_t>(n) * OC;
            for (int i = c0; i < c1; i++)
                dbias[i] += d[i];
        }
    }
}

} // namespace sof::kernels::cpu
