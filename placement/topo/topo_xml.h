/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * topo_xml.h — what the two XML readers of placement/topo share (the NCCL
 * topology reader, topo_nccl_xml.c, and the pre-check of hwloc XML,
 * topo_xmlcheck.c): both hand the text to libxml2 (loaded when first
 * needed: topo_xml_lib.c) after the same refusals, and turn its first complaint into
 * one line that names file:line. Private to placement/topo.
 */
#ifndef P3D_TOPO_XML_H
#define P3D_TOPO_XML_H

#include <libxml/parser.h>
#include <libxml/xmlerror.h>
#include <stddef.h>

/* The libxml2 functions the readers call (topo_xml_lib.c): libxml2 is
 * loaded the first time an XML file is read, so a launch that reads none
 * never maps it. Each pointer has its function's prototype (Free points
 * to libxml2's xmlFree variable: free what libxml2 allocated with
 * (*x->Free)(p)). */
typedef struct p3d_xmllib {
    void (*InitParser)(void);
    xmlParserCtxtPtr (*NewParserCtxt)(void);
    xmlDocPtr (*CtxtReadMemory)(xmlParserCtxtPtr, const char *, int, const char *, const char *, int);
    void (*SetStructuredErrorFunc)(void *, xmlStructuredErrorFunc);
    void (*FreeDoc)(xmlDocPtr);
    void (*FreeParserCtxt)(xmlParserCtxtPtr);
    long (*GetLineNo)(const xmlNode *);
    xmlChar *(*NodeListGetString)(xmlDocPtr, const xmlNode *, int);
    xmlParserCtxtPtr (*CreateMemoryParserCtxt)(const char *, int);
    int (*CtxtUseOptions)(xmlParserCtxtPtr, int);
    int (*ParseDocument)(xmlParserCtxtPtr);
    void (*StopParser)(xmlParserCtxtPtr);
    int (*SAX2GetLineNumber)(void *);
    xmlFreeFunc *Free;
} p3d_xmllib;

/* libxml2's table, loaded on the first call; NULL with *err (naming path,
 * the library and why) when it cannot be loaded. */
const p3d_xmllib *p3d_xmllib_get(const char *path, char **err);

/* Before libxml2 sees text: a NUL byte (binary data), an entity
 * declaration (so that no expansion can blow up, however nested) and more
 * than max_tags '<' (so that what libxml2 builds stays bounded) are
 * refused; what names the expected format in the message. 0, or -1 with
 * *err. */
int p3d_xml_prescan(const char *path, const char *text, size_t len, size_t max_tags, const char *what, char **err);

/* An xmlStructuredErrorFunc that keeps the first error into the xmlError
 * arg points to (zeroed before the parse); its message is ours: free(). */
void p3d_xml_keep_first(void *arg, xmlErrorPtr e);

/* The refusal of a text libxml2 found not well-formed: file:line, libxml2's
 * words (escaped), and "(truncated file?)" when it looks cut short.
 * Returns -1. */
int p3d_xml_refuse(const char *path, const char *text, size_t len, const xmlError *first, char **err);

/* The line of the first occurrence of s in the text (1 when none). */
int p3d_xml_line_of(const char *text, size_t len, const char *s);

#endif
