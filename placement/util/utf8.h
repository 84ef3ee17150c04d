/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * utf8.h — the UTF-8 decoder both escapers share, the terminal's
 * (termsafe.h, p3d_term_put) and the JSON writer's (strbuf.h,
 * p3d_sb_json_str), and the code points neither lets through raw (private
 * to placement/ and launcher/, as termsafe.h).
 */
#ifndef P3D_UTF8_H
#define P3D_UTF8_H

#include <stddef.h>

/* The length of the valid UTF-8 sequence at s (at most n bytes, n >= 1)
 * with its code point in *cp, or 0 when the byte at s does not start one
 * (a stray continuation byte, an overlong or truncated sequence, a
 * surrogate, past U+10FFFF). */
size_t p3d_utf8_seq(const unsigned char *s, size_t n, unsigned *cp);
/* 1 for a code point that must never reach a terminal raw: C1 controls
 * (U+0080-U+009F) and the bidirectional marks, embeddings, overrides and
 * isolates (U+061C, U+200E-U+200F, U+202A-U+202E, U+2066-U+2069). */
int p3d_term_cp_unsafe(unsigned cp);

#endif
