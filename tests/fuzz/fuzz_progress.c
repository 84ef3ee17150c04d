/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz_progress.c — a rank's progress line (launcher/run/ranks/progress.c): the
 * file is written by the rank, so it is input. Besides "no crash": what
 * parses has its fields in range, and written back in the documented form
 * it parses to the same values.
 */
#include "fuzz_common.h"
#include "ranks.h"


int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    p3d_progress p, q;
    if (size > P3D_PROGRESS_MAX)
        size = P3D_PROGRESS_MAX; /* what the agent reads at most */
    int r = p3d_progress_parse((const char *)data, size, &p);
    if (r < -1 || r > 1)
        abort();
    if (r != 1)
        return 0;
    if (p.step < 0 || p.ckpt < -1 || !(p.busy >= 0 && p.busy < 1e7))
        abort();
    char line[128];
    int n = p.ckpt >= 0 ? snprintf(line, sizeof line, "step=%d busy=%.9f ckpt=%d\n", p.step, p.busy, p.ckpt)
                        : snprintf(line, sizeof line, "step=%d busy=%.9f\n", p.step, p.busy);
    if (p3d_progress_parse(line, (size_t)n, &q) != 1 || q.step != p.step || q.ckpt != p.ckpt ||
        q.busy - p.busy > 1e-6 || p.busy - q.busy > 1e-6) {
        fprintf(stderr, "round trip: '%s' does not parse back to step %d busy %.9f ckpt %d\n", line, p.step, p.busy,
                p.ckpt);
        abort();
    }
    return 0;
}
