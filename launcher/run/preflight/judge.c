/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * judge.c — the reference a node is judged against (judge.h).
 */
#include "preflight.h"

#include <stdlib.h>

int p3d_judge_pick(int n, int high_bad)
{
    if (n < P3D_JUDGE_MIN)
        return -1;
    return high_bad ? n / 2 : (n - 1) / 2;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int p3d_judge_ref(double *v, int n, int high_bad, double *ref)
{
    *ref = -1;
    if (n <= 0)
        return -1;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    int k = p3d_judge_pick(n, high_bad);
    /* too few to judge: a value still shown in the tables, the lenient one */
    *ref = v[k >= 0 ? k : high_bad ? n - 1 : 0];
    return k >= 0 ? 0 : -1;
}
