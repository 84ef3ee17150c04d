/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * topo_xmlcheck.c — keeps foreign hwloc XML from taking par3drun down.
 *
 * hwloc 2.9 trusts its XML: an object without complete_cpuset or
 * complete_nodeset makes hwloc_topology_load() dereference NULL. So before
 * hwloc sees a file we (1) read it with libxml2's SAX interface (streaming:
 * hwloc files may be large; nothing is built) — well-formed,
 * <topology version="2.x">, every CPU-side object with its four sets —
 * which gives a message naming the line; and (2) load it with hwloc
 * in a child process under an alarm, which turns any crash or hang the scan
 * did not foresee into an error message too. Costs one fork and a second
 * parse (a few ms for the largest fixture; see bench/topo.sh).
 */
#include "topo_internal.h"
#include "topo_xml.h"

#include <errno.h>
#include <fcntl.h>
#include <hwloc.h>
#include <libxml/SAX2.h>
#include <libxml/parser.h>
#include <libxml/parserInternals.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "termsafe.h"

#define MAX_DEPTH 256
#define MAX_ELEMENTS (1 << 20)

/* Object types hwloc keeps on the CPU side and which therefore need
 * cpuset/complete_cpuset/nodeset/complete_nodeset. PU needs them too (its
 * parent's sets are computed from it). I/O and Misc objects have none. */
static int cpu_side_type(const char *t)
{
    static const char *const io[] = {"Bridge", "PCIDev", "OSDev", "Misc"};
    for (size_t i = 0; i < sizeof io / sizeof *io; i++)
        if (!strcmp(t, io[i]))
            return 0;
    return 1;
}

/* The scan's state: the SAX callbacks below fill it; the first refusal
 * stops the parser. */
typedef struct xscan {
    const char *path;
    int depth, elements, seen_root, stopped;
    char *err; /* our refusal, when the file is well-formed but not what hwloc can take */
    const p3d_xmllib *xml;
} xscan;

/* attrs as libxml2's SAX2 hands them: 5 pointers an attribute (localname,
 * prefix, URI, value, end of value). */
static const char *find_attr(const xmlChar **attrs, int n, const char *name, size_t *vlen)
{
    for (int i = 0; i < n; i++)
        if (!strcmp((const char *)attrs[5 * i], name)) {
            *vlen = (size_t)(attrs[5 * i + 4] - attrs[5 * i + 3]);
            return (const char *)attrs[5 * i + 3];
        }
    return NULL;
}

/* Keeps "path: line N: what" as the refusal. The parse goes on: when the
 * file turns out not well-formed (cut short in that very tag), libxml2's
 * complaint is the one to tell. */
__attribute__((format(printf, 3, 4))) static void refuse(xscan *s, int line, const char *fmt, ...)
{
    char what[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (!s->err)
        p3d_err(&s->err, "%s: line %d: %s", s->path, line, what);
}

/* The first element: <topology version="2.x"> (or 3.x: the installed
 * libhwloc decides, and topo_hwloc.c says which versions when it cannot). */
static void check_root(xscan *s, const char *name, const xmlChar **attrs, int n, int line)
{
    if (strcmp(name, "topology")) {
        refuse(s, line,
               "root element is <%.64s>: expected <topology> (an hwloc XML export) or <system> (an NCCL topology "
               "file, NCCL_TOPO_FILE)",
               p3d_tesc(name));
        return;
    }
    size_t vlen = 0;
    const char *ver = find_attr(attrs, n, "version", &vlen);
    if (!ver)
        refuse(s, line, "<topology> has no version: expected version=\"2.0\" (an hwloc 2.x export)");
    else if (vlen < 2 || (memcmp(ver, "2.", 2) && memcmp(ver, "3.", 2)))
        refuse(s, line,
               "<topology> version=\"%.*s\": expected version=\"2.0\" (an hwloc 2.x export; 3.x is tried with the "
               "installed libhwloc; 1.x files lose their NVLink matrix)",
               (int)(vlen < 32 ? vlen : 32), ver);
}

/* An <object>: a type, and on the CPU side the four sets hwloc needs. */
static void check_object(xscan *s, const xmlChar **attrs, int n, int line)
{
    size_t tlen = 0, vlen;
    const char *ty = find_attr(attrs, n, "type", &tlen);
    char tname[32];
    if (!ty || !tlen || tlen >= sizeof tname) {
        refuse(s, line, "<object> without a type");
        return;
    }
    snprintf(tname, sizeof tname, "%.*s", (int)tlen, ty);
    static const char *const sets[] = {"cpuset", "complete_cpuset", "nodeset", "complete_nodeset"};
    for (size_t k = 0; cpu_side_type(tname) && k < 4; k++)
        if (!find_attr(attrs, n, sets[k], &vlen)) {
            refuse(s, line,
                   "<object type=\"%s\"> has no %s attribute (hwloc 2.9 crashes on such files; re-export with "
                   "`lstopo --of xml`)",
                   p3d_tesc(tname), sets[k]);
            return;
        }
}

static void on_start(void *ctx, const xmlChar *localname, const xmlChar *prefix, const xmlChar *uri, int nns,
                     const xmlChar **ns, int nattrs, int ndefaulted, const xmlChar **attrs)
{
    (void)prefix, (void)uri, (void)nns, (void)ns, (void)ndefaulted;
    xscan *s = ((xmlParserCtxtPtr)ctx)->_private;
    int line = s->xml->SAX2GetLineNumber(ctx);
    const char *name = (const char *)localname;
    if (++s->depth > MAX_DEPTH) {
        refuse(s, line, "nested deeper than %d levels", MAX_DEPTH);
        s->stopped = 1;
        s->xml->StopParser(ctx);
        return;
    }
    if (++s->elements > MAX_ELEMENTS) {
        refuse(s, line, "more than %d elements: expected one machine's topology", MAX_ELEMENTS);
        s->stopped = 1;
        s->xml->StopParser(ctx);
        return;
    }
    if (!s->seen_root) {
        s->seen_root = 1;
        check_root(s, name, attrs, nattrs, line);
    }
    if (!s->err && !strcmp(name, "object"))
        check_object(s, attrs, nattrs, line);
}

static void on_end(void *ctx, const xmlChar *localname, const xmlChar *prefix, const xmlChar *uri)
{
    (void)localname, (void)prefix, (void)uri;
    xscan *s = ((xmlParserCtxtPtr)ctx)->_private;
    s->depth--;
}

int p3d_topo_xml_check(const char *path, const char *text, size_t len, char **err)
{
    int rc = -1;
    xscan s = {.path = path};
    xmlError first = {0};
    if (p3d_xml_prescan(path, text, len, 2 * (size_t)MAX_ELEMENTS + 64, "an hwloc XML text", err) < 0)
        return -1;
    const p3d_xmllib *x = s.xml = p3d_xmllib_get(path, err);
    if (!x)
        return -1;
    /* no serror here: libxml2 would hand it ctx->userData; errors go to the
     * structured handler set below, with &first */
    xmlSAXHandler sax = {.initialized = XML_SAX2_MAGIC, .startElementNs = on_start, .endElementNs = on_end};
    xmlParserCtxtPtr ctx = x->CreateMemoryParserCtxt(text, (int)len);
    if (!ctx)
        return p3d_err(err, "out of memory");
    xmlSAXHandler *own = ctx->sax;
    ctx->sax = &sax;
    ctx->userData = ctx; /* the callbacks get the context, so they can stop it */
    ctx->_private = &s;

    x->CtxtUseOptions(ctx, XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
    x->SetStructuredErrorFunc(&first, p3d_xml_keep_first);
    x->ParseDocument(ctx);
    x->SetStructuredErrorFunc(NULL, NULL);
    if (s.err && (s.stopped || ctx->wellFormed)) {
        *err = s.err;
        s.err = NULL;
    } else if (!ctx->wellFormed) {
        p3d_xml_refuse(path, text, len, &first, err);
    } else if (!s.seen_root) {
        p3d_err(err, "%s: no <topology> element: not an hwloc XML file", path);
    } else {
        rc = 0;
    }
    ctx->sax = own;
    x->FreeParserCtxt(ctx);
    free(first.message);
    free(s.err);
    return rc;
}

/* Child: 0 = loaded, 3 = hwloc refused it (the parent's own load will say
 * so); anything else (a signal, ASan's exit 1) = it crashed. */
static void probe_child(const char *text, size_t len)
{
    hwloc_topology_t t;
    /* The parent's crash handlers (a test framework's, a debugger's) must
     * not run here: this process exists to die cleanly if hwloc crashes. */
    static const int sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGALRM};
    for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++)
        signal(sigs[i], SIG_DFL);
    int fd = open("/dev/null", O_WRONLY);
    if (fd >= 0) {
        dup2(fd, 2); /* hwloc's and sanitizers' chatter is not for users */
        close(fd);
    }
    alarm(10);
    if (hwloc_topology_init(&t) < 0)
        _exit(3);
    hwloc_topology_set_io_types_filter(t, HWLOC_TYPE_FILTER_KEEP_ALL);
    if (hwloc_topology_set_xmlbuffer(t, text, (int)len + 1) < 0 || hwloc_topology_load(t) < 0)
        _exit(3);
    _exit(0);
}

int p3d_topo_xml_probe(const char *path, const char *text, size_t len, char **err)
{
    int rc = -1, st = 0;
    if (len > (size_t)0x7ffffffe)
        return p3d_err(err, "%s: too large for an hwloc XML", path);
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        /* Cannot isolate it; the scan above already passed, so go on. */
        rc = 0;
        goto out;
    }
    if (pid == 0)
        probe_child(text, len);
    while (waitpid(pid, &st, 0) < 0) {
        if (errno != EINTR) { /* SIGCHLD ignored: reaped already */
            rc = 0;
            goto out;
        }
    }
    if (WIFEXITED(st) && (WEXITSTATUS(st) == 0 || WEXITSTATUS(st) == 3)) {
        rc = 0;
        goto out;
    }
    if (WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM)
        p3d_err(err, "%s: hwloc did not finish reading this XML within 10 s", path);
    else if (WIFSIGNALED(st))
        p3d_err(err,
                "%s: hwloc crashed reading this XML (signal %d, %s): the "
                "file is malformed; re-export it with `lstopo --of xml`",
                path, WTERMSIG(st), strsignal(WTERMSIG(st)));
    else
        p3d_err(err,
                "%s: hwloc crashed reading this XML (exit %d): the file "
                "is malformed; re-export it with `lstopo --of xml`",
                path, WEXITSTATUS(st));
out:
    return rc;
}
