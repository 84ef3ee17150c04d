/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * topo_xml.c — the refusals and the messages both XML readers share
 * (topo_xml.h). Why libxml2 and not our own tokenizer: the two hand-written
 * scanners were two more parsers of hostile bytes to fuzz and keep, with
 * their own idea of well-formed; libxml2 is the parser hwloc itself reads
 * XML with on Debian (its libxml plugin), and is fuzzed upstream
 * (OSS-Fuzz); it is loaded only when an XML file is read
 * (topo_xml_lib.c). What stays ours is what each format may hold, the
 * limits, and the wording.
 */
#include "topo_internal.h"
#include "topo_xml.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "termsafe.h"

int p3d_xml_line_of(const char *text, size_t len, const char *s)
{
    const char *at = memmem(text, len, s, strlen(s));
    int line = 1;
    for (const char *q = text; at && q < at; q++)
        line += *q == '\n';
    return line;
}

int p3d_xml_prescan(const char *path, const char *text, size_t len, size_t max_tags, const char *what, char **err)
{
    const char *nul = memchr(text, 0, len);
    if (nul)
        return p3d_err(err, "%s: binary data (a NUL byte at offset %zu): expected %s", path, (size_t)(nul - text),
                       what);
    if (memmem(text, len, "<!ENTITY", 8))
        return p3d_err(err, "%s:%d: an entity declaration (<!ENTITY): not expected in %s", path,
                       p3d_xml_line_of(text, len, "<!ENTITY"), what);
    size_t lt = 0;
    for (const char *q = text, *end = text + len; (q = memchr(q, '<', (size_t)(end - q))); q++)
        lt++;
    if (lt > max_tags)
        return p3d_err(err, "%s: %zu tags: expected at most %zu in %s", path, lt, max_tags, what);
    if (len > 0x7ffffffe)
        return p3d_err(err, "%s: %zu bytes: too large for %s", path, len, what);
    return 0;
}

void p3d_xml_keep_first(void *arg, xmlErrorPtr e)
{
    xmlError *first = arg;
    if (!first->message && e && e->level >= XML_ERR_ERROR && e->message) {
        first->message = strdup(e->message); /* NULL (out of memory): the refusal says less */
        first->line = e->line;
    }
}

int p3d_xml_refuse(const char *path, const char *text, size_t len, const xmlError *first, char **err)
{
    if (!first->message)
        return p3d_err(err, "%s: not well-formed XML", path);
    char msg[200];
    snprintf(msg, sizeof msg, "%s", first->message);
    msg[strcspn(msg, "\n")] = 0;
    const char *last = text + len; /* a file cut short rarely ends in '>' */
    while (last > text && strchr(" \t\r\n", last[-1]))
        last--;
    int cut = strstr(msg, "Premature end") || (last > text && last[-1] != '>');
    return p3d_err(err, "%s:%d: not well-formed XML: %s%s", path, first->line, p3d_tesc(msg),
                   cut ? " (truncated file?)" : "");
}
