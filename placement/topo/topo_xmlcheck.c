/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * topo_xmlcheck.c — keeps foreign hwloc XML from taking par3drun down.
 *
 * hwloc 2.9 trusts its XML: an object without complete_cpuset or
 * complete_nodeset makes hwloc_topology_load() dereference NULL. So before
 * hwloc sees a file we (1) scan it ourselves — tags balanced, attributes
 * quoted, <topology version="2.x">, every CPU-side object with its four
 * sets — which gives a message naming the line; and (2) load it with hwloc
 * in a child process under an alarm, which turns any crash or hang the scan
 * did not foresee into an error message too. Costs one fork and a second
 * parse (a few ms for the largest fixture; see bench/topo.sh).
 */
#include "topo_internal.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <hwloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_DEPTH 256

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

static int line_of(const char *text, const char *p)
{
    int l = 1;
    for (const char *q = text; q < p; q++)
        l += *q == '\n';
    return l;
}

typedef struct attr {
    const char *name, *val;
    size_t nlen, vlen;
} attr;

static const attr *find_attr(const attr *a, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (a[i].nlen == strlen(name) && !memcmp(a[i].name, name, a[i].nlen))
            return &a[i];
    return NULL;
}

/* The scan's position and what it has seen so far. */
typedef struct xscan {
    const char *path, *text, *end;
    const char *p;
    int depth, seen_root;
    const char *stack[MAX_DEPTH];
    size_t stack_len[MAX_DEPTH];
    attr at[64];
    int nat;
} xscan;

static int is_name_char(char c)
{
    return isalnum((unsigned char)c) || c == '_' || c == '-' || c == ':' || c == '.';
}

/* The attributes of the tag <name opened at lt, up to its '>' or '/>'
 * (*self then). Keeps the first 64 in s->at. */
static int read_attrs(xscan *s, const char *lt, const char *name, size_t nlen, int closing, int *self,
                      char **err)
{
    const char *path = s->path, *text = s->text, *end = s->end;
    const char *p = s->p;
    s->nat = 0;
    *self = 0;
    for (;;) {
        while (p < end && isspace((unsigned char)*p))
            p++;
        if (p >= end)
            return p3d_err(err, "%s: line %d: tag <%.*s never closed (truncated "
                           "file?)", path, line_of(text, lt), (int)nlen, name);
        if (*p == '>') {
            p++;
            break;
        }
        if (*p == '/' && p + 1 < end && p[1] == '>' && !closing) {
            *self = 1;
            p += 2;
            break;
        }
        const char *an = p;
        while (p < end && is_name_char(*p))
            p++;
        size_t anlen = (size_t)(p - an);
        if (p + 1 >= end)
            return p3d_err(err, "%s: line %d: tag <%.*s never closed (truncated "
                           "file?)", path, line_of(text, lt), (int)nlen, name);
        if (!anlen || closing || p >= end || *p != '=' || p + 1 >= end ||
            (p[1] != '"' && p[1] != '\''))
            return p3d_err(err, "%s: line %d: malformed attribute in <%.*s>: "
                           "expected name=\"value\"", path, line_of(text, p),
                           (int)nlen, name);
        char q = p[1];
        const char *v = p + 2;
        const char *ve = memchr(v, q, (size_t)(end - v));
        if (!ve)
            return p3d_err(err, "%s: line %d: attribute '%.*s' has no closing "
                           "quote", path, line_of(text, an), (int)anlen, an);
        if (s->nat < (int)(sizeof s->at / sizeof *s->at))
            s->at[s->nat++] = (attr){an, v, anlen, (size_t)(ve - v)};
        p = ve + 1;
    }
    s->p = p;
    return 0;
}

/* The first element: <topology version="2.x"> (or 3.x). */
static int check_root(const xscan *s, const char *lt, const char *name, size_t nlen, char **err)
{
    const char *path = s->path, *text = s->text;
    if (nlen != 8 || memcmp(name, "topology", 8))
        return p3d_err(err, "%s: line %d: root element is <%.*s>: expected "
                       "<topology> (an hwloc XML export) or <system> (an "
                       "NCCL topology file, NCCL_TOPO_FILE)", path,
                       line_of(text, lt), (int)(nlen < 64 ? nlen : 64), name);
    const attr *ver = find_attr(s->at, s->nat, "version");
    /* 3.x (hwloc's master branch): the installed libhwloc decides
     * (topo_hwloc.c says which versions when it cannot) */
    if (!ver || ver->vlen < 2 || (memcmp(ver->val, "2.", 2) && memcmp(ver->val, "3.", 2)))
        return p3d_err(err, "%s: line %d: <topology> %s%.*s%s: expected "
                       "version=\"2.0\" (an hwloc 2.x export; 3.x is tried "
                       "with the installed libhwloc; 1.x files lose their "
                       "NVLink matrix)", path, line_of(text, lt),
                       ver ? "version=\"" : "has no version",
                       ver ? (int)ver->vlen : 0, ver ? ver->val : "",
                       ver ? "\"" : "");
    return 0;
}

/* An <object>: a type, and on the CPU side the four sets hwloc needs. */
static int check_object(const xscan *s, const char *lt, char **err)
{
    const char *path = s->path, *text = s->text;
    const attr *ty = find_attr(s->at, s->nat, "type");
    char tname[32] = "";
    if (!ty || !ty->vlen || ty->vlen >= sizeof tname)
        return p3d_err(err, "%s: line %d: <object> without a type", path,
                       line_of(text, lt));
    memcpy(tname, ty->val, ty->vlen);
    static const char *const sets[] = {"cpuset", "complete_cpuset",
                                       "nodeset", "complete_nodeset"};
    for (size_t k = 0; cpu_side_type(tname) && k < 4; k++)
        if (!find_attr(s->at, s->nat, sets[k]))
            return p3d_err(err, "%s: line %d: <object type=\"%s\"> has no "
                           "%s attribute (hwloc 2.9 crashes on such files; "
                           "re-export with `lstopo --of xml`)", path,
                           line_of(text, lt), tname, sets[k]);
    return 0;
}

/* One tag opened at lt: a declaration or comment is skipped, a closing tag
 * must match the open one, an opening one is checked and pushed. */
static int scan_tag(xscan *s, const char *lt, char **err)
{
    const char *path = s->path, *text = s->text, *end = s->end;
    const char *p = lt + 1;
    if (p < end && (*p == '?' || *p == '!')) {
        const char *term = *p == '?' ? "?>" : (!strncmp(p, "!--", 3) ? "-->" : ">");
        const char *close = memmem(p, (size_t)(end - p), term, strlen(term));
        if (!close)
            return p3d_err(err, "%s: line %d: '<%c' never closed (truncated "
                           "file?)", path, line_of(text, lt), *p);
        s->p = close + strlen(term);
        return 0;
    }
    int closing = p < end && *p == '/';
    if (closing)
        p++;
    const char *name = p;
    while (p < end && is_name_char(*p))
        p++;
    size_t nlen = (size_t)(p - name);
    if (!nlen)
        return p3d_err(err, "%s: line %d: '<' not followed by a tag name: not "
                       "well-formed XML", path, line_of(text, lt));
    int self;
    s->p = p;
    if (read_attrs(s, lt, name, nlen, closing, &self, err) < 0)
        return -1;
    int depth = s->depth;
    if (closing) {
        if (!depth || s->stack_len[depth - 1] != nlen || memcmp(s->stack[depth - 1], name, nlen))
            return p3d_err(err, "%s: line %d: </%.*s> does not close %s%.*s%s",
                           path, line_of(text, lt), (int)nlen, name,
                           depth ? "<" : "any open tag", depth ? (int)s->stack_len[depth - 1] : 0,
                           depth ? s->stack[depth - 1] : "", depth ? ">" : "");
        s->depth--;
        return 0;
    }
    if (!s->seen_root) {
        s->seen_root = 1;
        if (check_root(s, lt, name, nlen, err) < 0)
            return -1;
    }
    if (nlen == 6 && !memcmp(name, "object", 6) && check_object(s, lt, err) < 0)
        return -1;
    if (!self) {
        if (depth >= MAX_DEPTH)
            return p3d_err(err, "%s: line %d: nested deeper than %d levels",
                           path, line_of(text, lt), MAX_DEPTH);
        s->stack[depth] = name;
        s->stack_len[s->depth++] = nlen;
    }
    return 0;
}

int p3d_topo_xml_check(const char *path, const char *text, size_t len,
                       char **err)
{
    int rc = -1;
    xscan s = {.path = path, .text = text, .end = text + len, .p = text};
    if (memchr(text, 0, len)) {
        p3d_err(err, "%s: binary data (a NUL byte at offset %zu): expected "
                "an hwloc XML text", path,
                (size_t)((const char *)memchr(text, 0, len) - text));
        goto out;
    }
    while (s.p < s.end) {
        const char *lt = memchr(s.p, '<', (size_t)(s.end - s.p));
        if (!lt)
            break;
        if (s.depth == 0 && s.seen_root) {
            p3d_err(err, "%s: line %d: content after </topology>", path,
                    line_of(text, lt));
            goto out;
        }
        if (scan_tag(&s, lt, err) < 0)
            goto out;
    }
    if (!s.seen_root) {
        p3d_err(err, "%s: no <topology> element: not an hwloc XML file", path);
        goto out;
    }
    if (s.depth) {
        p3d_err(err, "%s: <%.*s> is never closed (truncated file?)", path,
                (int)s.stack_len[s.depth - 1], s.stack[s.depth - 1]);
        goto out;
    }
    rc = 0;
out:
    return rc;
}

/* Child: 0 = loaded, 3 = hwloc refused it (the parent's own load will say
 * so); anything else (a signal, ASan's exit 1) = it crashed. */
static void probe_child(const char *text, size_t len)
{
    hwloc_topology_t t;
    /* The parent's crash handlers (a test framework's, a debugger's) must
     * not run here: this process exists to die cleanly if hwloc crashes. */
    static const int sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT,
                               SIGALRM};
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
    if (hwloc_topology_set_xmlbuffer(t, text, (int)len + 1) < 0 ||
        hwloc_topology_load(t) < 0)
        _exit(3);
    _exit(0);
}

int p3d_topo_xml_probe(const char *path, const char *text, size_t len,
                       char **err)
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
        p3d_err(err, "%s: hwloc did not finish reading this XML within 10 s",
                path);
    else if (WIFSIGNALED(st))
        p3d_err(err, "%s: hwloc crashed reading this XML (signal %d, %s): the "
                "file is malformed; re-export it with `lstopo --of xml`",
                path, WTERMSIG(st), strsignal(WTERMSIG(st)));
    else
        p3d_err(err, "%s: hwloc crashed reading this XML (exit %d): the file "
                "is malformed; re-export it with `lstopo --of xml`", path,
                WEXITSTATUS(st));
out:
    return rc;
}
