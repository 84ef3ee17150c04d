/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz_termsafe.c — the one escape function (placement/util/termsafe.c)
 * and the JSON writer that shares its UTF-8 decoder (strbuf.c
 * p3d_sb_json_str). For any bytes: the terminal escape is valid UTF-8
 * with no C0 control (newline and tab only when kept), DEL, C1 control
 * or bidi mark, and a clean input passes unchanged; the JSON literal is
 * valid UTF-8 without raw controls, parses (cJSON) to one string, and that
 * string is the input itself when the input was valid UTF-8.
 */
#include "fuzz_common.h"

#include "strbuf.h"
#include "termsafe.h"

#include <cjson/cJSON.h>

/* 1 when s is valid UTF-8 and holds nothing a terminal would act on
 * (newline and tab allowed as flags keep them). */
static int clean_out(const char *s, size_t n, unsigned flags)
{
    size_t i = 0;
    while (i < n) {
        unsigned cp;
        size_t k = p3d_utf8_seq((const unsigned char *)s + i, n - i, &cp);
        int kept = (cp == '\n' && (flags & P3D_TERM_KEEP_NL)) || (cp == '\t' && (flags & P3D_TERM_KEEP_TAB));
        if (!k || cp == 0x7f || p3d_term_cp_unsafe(cp) || (cp < 0x20 && !kept))
            return 0;
        i += k;
    }
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 1 << 16)
        return 0;
    unsigned flags = size ? data[0] & 3u : 0;
    const char *s = (const char *)data + (size ? 1 : 0);
    size_t n = size ? size - 1 : 0;

    p3d_sb b = {0};
    p3d_term_put(&b, s, n, flags);
    char *t = p3d_sb_finish(&b);
    size_t tl = t ? strlen(t) : 0;
    if (!clean_out(t ? t : "", tl, flags))
        abort();
    if (n && p3d_term_clean(s, n, flags) && (tl != n || memcmp(t, s, n)))
        abort(); /* clean input must pass unchanged */
    free(t);

    /* JSON: a C string (up to the first NUL) */
    char *z = malloc(n + 1);
    if (!z)
        abort();
    memcpy(z, s, n);
    z[n] = 0;
    size_t zl = strlen(z);
    p3d_sb j = {0};
    p3d_sb_putc(&j, '[');
    p3d_sb_json_str(&j, z);
    p3d_sb_putc(&j, ']');
    char *js = p3d_sb_finish(&j);
    if (!js || !clean_out(js, strlen(js), 0))
        abort();
    cJSON *doc = cJSON_Parse(js);
    cJSON *str = doc ? cJSON_GetArrayItem(doc, 0) : NULL;
    if (!str || !cJSON_IsString(str))
        abort();
    /* cJSON decodes \u escapes to UTF-8; a valid input comes back whole
     * (\u0000 cannot occur: z has no NUL) */
    unsigned cp;
    size_t i = 0;
    int valid = 1;
    while (i < zl && valid) {
        size_t k = p3d_utf8_seq((const unsigned char *)z + i, zl - i, &cp);
        valid = k != 0;
        i += k;
    }
    if (valid && strcmp(str->valuestring, z) != 0)
        abort();
    cJSON_Delete(doc);
    free(js);
    free(z);
    return 0;
}
