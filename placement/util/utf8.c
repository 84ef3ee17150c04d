/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * utf8.c — the UTF-8 decoder and the code points a terminal must never get
 * raw (see utf8.h). Below both escapers, termsafe.c (the terminal) and
 * strbuf.c (JSON strings), which build on it and on nothing of each other
 * for it.
 */
#include "utf8.h"

size_t p3d_utf8_seq(const unsigned char *s, size_t n, unsigned *cp)
{
    unsigned c = s[0], min, v;
    size_t k;
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    if (c >= 0xc2 && c <= 0xdf)
        k = 2, min = 0x80, v = c & 0x1f;
    else if (c >= 0xe0 && c <= 0xef)
        k = 3, min = 0x800, v = c & 0x0f;
    else if (c >= 0xf0 && c <= 0xf4)
        k = 4, min = 0x10000, v = c & 0x07;
    else
        return 0;
    if (n < k)
        return 0;
    for (size_t i = 1; i < k; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        v = v << 6 | (s[i] & 0x3f);
    }
    if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
        return 0;
    *cp = v;
    return k;
}

int p3d_term_cp_unsafe(unsigned cp)
{
    return (cp >= 0x80 && cp <= 0x9f) || cp == 0x61c || cp == 0x200e || cp == 0x200f ||
           (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
}
