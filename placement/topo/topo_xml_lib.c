/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * topo_xml_lib.c — libxml2, loaded the first time an XML file is read
 * (topo_xml.h, p3d_xmllib_get), not linked.
 *
 * Why: libxml2 brings the ICU (a 30 MB data library), libstdc++, zlib and
 * liblzma along, and a linked library is mapped and relocated at every
 * start of par3drun, of every agent it forks and execs, whether or not an
 * XML file is read. Most launches read none (the topology comes from hwloc
 * or the cache), and those libraries cost a one-rank launch about 1.5 ms
 * (bench/launch.sh). Only a --topology or --nccl-topo XML pays for them.
 *
 * The table's pointer types are the headers' prototypes: each is checked
 * against the function it is loaded from at compile time (SAME below),
 * and the binary holds no reference to libxml2. The soname is the one the build found (P3D_XML2_SONAME, read
 * from the library pkg-config names).
 */
#include "topo_internal.h"
#include "topo_xml.h"

#include <dlfcn.h>
#include <libxml/SAX2.h>
#include <libxml/parser.h>
#include <libxml/parserInternals.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#ifndef P3D_XML2_SONAME
#define P3D_XML2_SONAME "libxml2.so.2"
#endif

/* name: the symbol; at: where its address goes in the table */
#define SYM(f)                                                                                                         \
    {                                                                                                                  \
        "xml" #f, offsetof(p3d_xmllib, f)                                                                              \
    }
static const struct {
    const char *name;
    size_t at;
} syms[] = {SYM(InitParser),
            SYM(NewParserCtxt),
            SYM(CtxtReadMemory),
            SYM(SetStructuredErrorFunc),
            SYM(FreeDoc),
            SYM(FreeParserCtxt),
            SYM(GetLineNo),
            SYM(NodeListGetString),
            SYM(CreateMemoryParserCtxt),
            SYM(CtxtUseOptions),
            SYM(ParseDocument),
            SYM(StopParser),
            SYM(SAX2GetLineNumber),
            SYM(Free)};

/* Each pointer's type is the function's (for Free, the variable's), as
 * libxml2's headers declare it; __typeof__ does not evaluate its operand,
 * so nothing here refers to libxml2. */
#define SAME(f)                                                                                                        \
    _Static_assert(__builtin_types_compatible_p(__typeof__(((p3d_xmllib *)0)->f), __typeof__(&xml##f)),                \
                   "p3d_xmllib." #f " is not xml" #f "'s type")
SAME(InitParser);
SAME(NewParserCtxt);
SAME(CtxtReadMemory);
SAME(SetStructuredErrorFunc);
SAME(FreeDoc);
SAME(FreeParserCtxt);
SAME(GetLineNo);
SAME(NodeListGetString);
SAME(CreateMemoryParserCtxt);
SAME(CtxtUseOptions);
SAME(ParseDocument);
SAME(StopParser);
SAME(SAX2GetLineNumber);
SAME(Free);

static p3d_xmllib lib;
static int tried, loaded;
static char why[256];

static void load(void)
{
    void *h = dlopen(P3D_XML2_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(why, sizeof why, "%s", e ? e : "dlopen failed");
        return;
    }
    for (size_t k = 0; k < sizeof syms / sizeof syms[0]; k++) {
        void *p = dlsym(h, syms[k].name);
        if (!p) {
            snprintf(why, sizeof why, "it has no %s (an unexpected libxml2 version)", syms[k].name);
            dlclose(h);
            return;
        }
        /* POSIX: a function's address from dlsym converts to its pointer */
        memcpy((char *)&lib + syms[k].at, &p, sizeof p);
    }
    lib.InitParser();
    loaded = 1; /* never closed: parsers run until the process ends */
}

const p3d_xmllib *p3d_xmllib_get(const char *path, char **err)
{
    if (!tried) {
        tried = 1;
        load();
    }
    if (loaded)
        return &lib;
    p3d_err(err, "%s: reading XML needs libxml2 (%s), which could not be loaded: %s (install the libxml2 package)",
            path, P3D_XML2_SONAME, why);
    return NULL;
}
