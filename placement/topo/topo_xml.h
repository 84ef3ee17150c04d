/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * topo_xml.h — what the two XML readers of placement/topo share (the NCCL
 * topology reader, topo_nccl_xml.c, and the pre-check of hwloc XML,
 * topo_xmlcheck.c): both hand the text to libxml2, which Debian's hwloc
 * links already, after the same refusals, and turn its first complaint into
 * one line that names file:line. Private to placement/topo.
 */
#ifndef P3D_TOPO_XML_H
#define P3D_TOPO_XML_H

#include <libxml/xmlerror.h>
#include <stddef.h>

/* Before libxml2 sees text: a NUL byte (binary data), an entity
 * declaration (so that no expansion can blow up, however nested) and more
 * than max_tags '<' (so that what libxml2 builds stays bounded) are
 * refused; what names the expected format in the message. 0, or -1 with
 * *err. */
int p3d_xml_prescan(const char *path, const char *text, size_t len, size_t max_tags, const char *what, char **err);

/* An xmlStructuredErrorFunc that keeps the first error into the xmlError
 * arg points to (zeroed before the parse); free its message with xmlFree. */
void p3d_xml_keep_first(void *arg, xmlErrorPtr e);

/* The refusal of a text libxml2 found not well-formed: file:line, libxml2's
 * words (escaped), and "(truncated file?)" when it looks cut short.
 * Returns -1. */
int p3d_xml_refuse(const char *path, const char *text, size_t len, const xmlError *first, char **err);

/* The line of the first occurrence of s in the text (1 when none). */
int p3d_xml_line_of(const char *text, size_t len, const char *s);

#endif
