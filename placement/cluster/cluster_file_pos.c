/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cluster_file_pos.c — where things sit in a cluster file's text, for
 * messages: the line of each nodes[] entry and of a key inside it (a small
 * scan of text cJSON already accepted, run only on the error path), and
 * the line, column and likely cause of a JSON syntax error. Why not a
 * parser that keeps positions: the comment at the top of cluster_file.c.
 */
#include "cluster_file.h"

#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

size_t cf_line_of(const cf_ctx *x, size_t off)
{
    size_t line = 1;
    for (size_t i = 0; i < off && i < x->len; i++)
        line += x->buf[i] == '\n';
    return line;
}

/* Finds the spans of the objects inside the top-level "nodes" array. Tolerant:
 * it only runs on text cJSON already accepted. */
static void cf_scan_spans(cf_ctx *x)
{
    if (x->scanned)
        return;
    x->scanned = 1;
    const char *s = x->buf;
    size_t n = x->len, cap = 0;
    int depth = 0, in_nodes = 0;
    size_t key_lo = 0, key_hi = 0; /* last string seen at depth 1 */
    int last_was_nodes = 0;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (ch == '"') {
            size_t lo = i + 1;
            for (i++; i < n && s[i] != '"'; i++)
                if (s[i] == '\\')
                    i++;
            if (depth == 1) {
                key_lo = lo;
                key_hi = i;
            }
            continue;
        }
        if (ch == ':' && depth == 1)
            last_was_nodes = key_hi - key_lo == 5 && memcmp(s + key_lo, "nodes", 5) == 0;
        if (ch == '[' || ch == '{') {
            depth++;
            if (ch == '[' && depth == 2 && last_was_nodes)
                in_nodes = 1;
            if (ch == '{' && depth == 3 && in_nodes) {
                if (x->nspans == cap) {
                    size_t nc = cap ? cap * 2 : 64;
                    size_t *a = realloc(x->span_lo, nc * sizeof *a);
                    size_t *b = a ? realloc(x->span_hi, nc * sizeof *b) : NULL;
                    if (a)
                        x->span_lo = a;
                    if (!b)
                        return;
                    x->span_hi = b;
                    cap = nc;
                }
                x->span_lo[x->nspans] = i;
                x->span_hi[x->nspans++] = n;
            }
        } else if (ch == ']' || ch == '}') {
            if (ch == '}' && depth == 3 && in_nodes && x->nspans)
                x->span_hi[x->nspans - 1] = i + 1;
            if (ch == ']' && depth == 2)
                in_nodes = 0;
            depth--;
        }
    }
}

/* Line of `"key"` inside nodes[entry] (or of the entry itself when key is
 * NULL or not found); entry SIZE_MAX means top level. 0 when unknown. */
size_t cf_find_line(cf_ctx *x, size_t entry, const char *key)
{
    size_t lo = 0, hi = x->len;
    if (entry != SIZE_MAX) {
        cf_scan_spans(x);
        if (entry >= x->nspans)
            return 0;
        lo = x->span_lo[entry];
        hi = x->span_hi[entry];
    }
    if (key) {
        char pat[80];
        int k = snprintf(pat, sizeof pat, "\"%s\"", key);
        if (k > 0 && (size_t)k < sizeof pat) {
            const char *p = memmem(x->buf + lo, hi - lo, pat, (size_t)k);
            if (p)
                return cf_line_of(x, (size_t)(p - x->buf));
        }
    }
    return entry == SIZE_MAX ? 0 : cf_line_of(x, lo);
}

/* "PATH:LINE: nodes[3].topology" (or without LINE when unknown). */
void cf_where(cf_ctx *x, size_t entry, const char *key, char *out, size_t cap)
{
    size_t line = cf_find_line(x, entry, key);
    int k = line ? snprintf(out, cap, "%s:%zu: ", x->path, line) : snprintf(out, cap, "%s: ", x->path);
    if (k < 0 || (size_t)k >= cap)
        return;
    if (entry == SIZE_MAX)
        snprintf(out + k, cap - (size_t)k, "%s", key ? key : "");
    else if (key)
        snprintf(out + k, cap - (size_t)k, "nodes[%zu].%s", entry, key);
    else
        snprintf(out + k, cap - (size_t)k, "nodes[%zu]", entry);
}

/* The parse error cJSON reports, as PATH:LINE:COL plus the likely cause. */
int cf_syntax_error(cf_ctx *x, const char *end, char **err)
{
    size_t pos = end && end >= x->buf ? (size_t)(end - x->buf) : 0;
    if (pos > x->len)
        pos = x->len;
    size_t line = 1, col = 1;
    int depth = 0, maxdepth = 0, instr = 0;
    for (size_t i = 0; i < pos; i++) {
        char ch = x->buf[i];
        if (ch == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
        if (instr) {
            if (ch == '\\')
                i++, col++;
            else if (ch == '"')
                instr = 0;
        } else if (ch == '"') {
            instr = 1;
        } else if (ch == '[' || ch == '{') {
            if (++depth > maxdepth)
                maxdepth = depth;
        } else if (ch == ']' || ch == '}') {
            depth--;
        }
    }
    /* where the whole text ends up: unclosed brackets or string mean the
     * file was cut short, whatever token cJSON stopped at */
    int enddepth = depth, endstr = instr;
    for (size_t i = pos; i < x->len; i++) {
        char ch = x->buf[i];
        if (endstr) {
            if (ch == '\\')
                i++;
            else if (ch == '"')
                endstr = 0;
        } else if (ch == '"') {
            endstr = 1;
        } else if (ch == '[' || ch == '{') {
            enddepth++;
        } else if (ch == ']' || ch == '}') {
            enddepth--;
        }
    }
    if (maxdepth >= CJSON_NESTING_LIMIT)
        return p3d_err(err,
                       "%s:%zu:%zu: JSON nested deeper than %d levels "
                       "(a cluster file needs 3)",
                       x->path, line, col, CJSON_NESTING_LIMIT);
    if (pos >= x->len || enddepth > 0 || endstr) {
        size_t el = 1, ec = 1;
        for (size_t i = 0; i < x->len; i++, ec++)
            if (x->buf[i] == '\n')
                el++, ec = 0;
        return p3d_err(err,
                       "%s:%zu:%zu: invalid JSON: unexpected end of file"
                       "%s",
                       x->path, el, ec,
                       endstr         ? " inside a string"
                       : enddepth > 0 ? " (a '{' or '[' is never closed)"
                                      : "");
    }
    char near[24];
    size_t k = 0;
    for (size_t i = pos; i < x->len && k < 16 && x->buf[i] != '\n'; i++)
        near[k++] = (unsigned char)x->buf[i] < 0x20 ? '?' : x->buf[i];
    near[k] = 0;
    return p3d_err(err, "%s:%zu:%zu: invalid JSON near '%s'", x->path, line, col, near);
}
