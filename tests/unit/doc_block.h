/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * doc_block.h — for the tests that keep a printed table in a doc in sync
 * (test_ctl_table, test_node_tables): the doc's text between two marker
 * lines must be exactly what the code prints.
 */
#ifndef P3D_TEST_DOC_BLOCK_H
#define P3D_TEST_DOC_BLOCK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The whole file at path (caller frees), or NULL. */
static inline char *doc_slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    char *buf = NULL;
    size_t cap = 0, len = 0, n;
    char chunk[4096];
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
        if (len + n + 1 > cap) {
            cap = 2 * (len + n + 1);
            char *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = nb;
        }
        memcpy(buf + len, chunk, n);
        len += n;
        buf[len] = 0;
    }
    fclose(f);
    return buf;
}

/* docs/<name> (under $P3D_SRC, else ..) holds text between the lines
 * begin and end: NULL, or what is wrong (a static string). */
static inline const char *doc_block_check(const char *name, const char *begin, const char *end, const char *text)
{
    const char *src = getenv("P3D_SRC");
    char path[4096];
    snprintf(path, sizeof path, "%s/docs/%s", src ? src : "..", name);
    char *doc = doc_slurp(path);
    if (!doc)
        return "the doc cannot be read";
    const char *why = NULL;
    char *b = strstr(doc, begin), *e = b ? strstr(b, end) : NULL;
    if (!b || !e)
        why = "its markers are missing";
    else if ((size_t)(e - b - (long)strlen(begin)) != strlen(text) || memcmp(b + strlen(begin), text, strlen(text)))
        why = "it differs from the code's table";
    free(doc);
    return why;
}

#endif
