/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * termsafe.h — the one path from outside text to the terminal (private to
 * placement/ and launcher/). Every string that came from input or from the
 * wire (node, rack, domain, policy and file names, hostnames, versions,
 * command output) goes through p3d_term_put() or one of its wrappers before
 * a message, table or warning prints it.
 *
 * What is escaped, and how: C0 controls and DEL as \n, \r, \t or \xHH;
 * C1 controls (U+0080-U+009F; some terminals take U+009B as CSI), the
 * bidirectional marks, embeddings, overrides and isolates (U+061C,
 * U+200E-U+200F, U+202A-U+202E, U+2066-U+2069) as \uXXXX; bytes that are
 * not valid UTF-8 (stray continuation bytes, overlong or truncated
 * sequences, surrogates, past U+10FFFF) as \xHH. Valid UTF-8 otherwise
 * passes unchanged, so names in other scripts stay readable.
 */
#ifndef P3D_TERMSAFE_H
#define P3D_TERMSAFE_H

#include <stddef.h>
#include <stdio.h>

#include "strbuf.h"
#include "utf8.h" /* p3d_utf8_seq, p3d_term_cp_unsafe */

/* Keep '\n' as a newline (a multi-line message of ours); '\t' too. */
#define P3D_TERM_KEEP_NL 1u
#define P3D_TERM_KEEP_TAB 2u

/* Appends the first len bytes of s to b, escaped as above. */
void p3d_term_put(p3d_sb *b, const char *s, size_t len, unsigned flags);

/* 1 when s[0..len) needs no escaping under flags. */
int p3d_term_clean(const char *s, size_t len, unsigned flags);

/* A malloc'd escaped copy of at most cap input bytes of s[0..len), with
 * " ... (N more bytes)" when cut; NULL when out of memory. Caller frees. */
char *p3d_term_dup(const char *s, size_t len, size_t cap, unsigned flags);

/* For printf arguments: s escaped (nothing kept, a newline too) into one
 * of 8 per-thread buffers, valid until the 8th next call on the same
 * thread; at most 1024 input bytes are shown. NULL gives "(null)". */
const char *p3d_tesc(const char *s);

/* fputs(s, f) with the escapes above, newlines and tabs kept: the last
 * step of every message this program writes to a terminal. */
void p3d_term_fputs(const char *s, FILE *f);

/* Makes *stream (stderr, at the start of main) a stream whose every write
 * is escaped as p3d_term_fputs does (newlines and tabs kept) before it
 * reaches the same fd: the structural end of the one path to the
 * terminal. A message that forgot p3d_tesc() on a name from outside still
 * prints no raw control, no bidi mark and no invalid UTF-8. Unbuffered,
 * like stderr; bytes written to the fd itself (a rank's relayed output,
 * spawn.c's async-signal-safe writes) are not touched. 0, or -1 (the
 * stream is left as it was). */
int p3d_term_guard(FILE **stream);

#endif
