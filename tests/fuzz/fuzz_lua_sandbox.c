/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz_lua_sandbox.c — the policy sandbox itself (placement/policy/
 * lua_sandbox.c, lua_patterns.c, lua_tables.c) against generated policies.
 *
 * Structure-aware: the input bytes are decoded into a policy whose place()
 * runs a list of statements, each inside pcall, drawn from what issue 13
 * found dangerous: string functions with big arguments, patterns built from
 * pattern tokens (quantifiers, sets, %b, %f, anchors, captures,
 * back-references) through find/match/gmatch/gsub with every kind of
 * replacement, metatables with every metamethod, the C functions a policy
 * can reach called with forged arguments (pairs(cluster)'s iterator on
 * foreign tables, xpcall with hundreds of arguments), print and error with
 * huge or control-character texts, load of generated chunks, and
 * coroutines (which must stay out of reach).
 * Limits are small (32 MiB, 10^7 instructions, 0.25 s of CPU), so a slow
 * input ends in the CPU-time error. Any crash, sanitizer report, or a
 * failure without a message is a bug.
 */
#include "fuzz_topofiles.h"

#include "policy_internal.h"


static p3d_cluster *cl;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    static const char cluster[] = "{\"nodes\": [\n"
                                  " {\"name\": \"n[1-2]\", \"topology\": \"pcie8-nvlink-pairs.xml\", \"rack\": \"r0\"},\n"
                                  " {\"name\": \"m1\", \"topology\": \"dgx1-v100.xml\", \"rack\": \"r1\"}\n"
                                  "]}\n";
    cl = fz_policy_cluster("fuzz_lua_sandbox", "sandbox-cluster.json", cluster);
    char p[512], *err = NULL;
    /* racks from a Slurm tree, so cluster.rack_distance exists */
    static const char topo[] = "SwitchName=s0 Nodes=n[1-2]\nSwitchName=s1 Nodes=m1\n"
                               "SwitchName=top Switches=s[0-1]\n";
    fz_path(p, sizeof p, "sandbox-topology.conf");
    fz_write(p, topo, sizeof topo - 1);
    if (p3d_cluster_apply_slurm_topology(cl, p, &err) < 0 || !cl->rack_dist) {
        fprintf(stderr, "fuzz_lua_sandbox: fixed topology.conf does not apply: %s\n", err ? err : "no racks");
        abort();
    }
    return 0;
}

typedef struct cur {
    const uint8_t *p;
    size_t n, off;
} cur;

static unsigned next(cur *c)
{
    return c->off < c->n ? c->p[c->off++] : 0;
}

#define PICK(c, arr) (arr[next(c) % (sizeof arr / sizeof *arr)])

/* string values: S1..S4 are set by "let" statements */
static const char *const strs[] = {"S1", "S2", "S3", "S4", "''", "'a'", "'abc'", "'\\0x\\0'", "'%'",
                                   "('a'):rep(3000)", "('('):rep(5000)", "tostring(cluster)"};
static const char *const sizes[] = {"0", "1", "7", "100", "4096", "65536", "1 << 20", "4 << 20", "-1",
                                    "2^31", "1e308", "math.maxinteger", "math.mininteger"};
static const char *const fills[] = {"'a'", "'ab'", "'('", "')'", "'^'", "'\\n'", "'\\27[2J'", "'%'",
                                    "' '", "'\\0'", "'\\255'", "'b'"};
static const char *const ptoks[] = {".",  "-",    "*",   "+",   "?",     "%a", "%d", "%s",  "%w", "[",  "]",
                                    "^",  "$",    "(",   ")",   "()",    "%1", "%2", "%b()", "%f[%w]", "a",
                                    "b",  "%",    "[%]", "[^", "%z",     "\\0", "-",  ".-",  ".*"};
static const char *const inits[] = {"nil", "1", "-1", "0", "3", "1e9", "-1e9", "math.mininteger", "2.5"};
static const char *const vals[] = {"nil",  "true",  "0",  "1.5",      "'k'",        "{}",       "cluster",
                                   "job",  "cluster.nodes", "cluster.nodes[1]", "M1", "M2", "S1", "print",
                                   "string", "_G", "setmetatable({}, {__index = 1})", "function() end",
                                   "cluster.rack_distance", "cluster.nodes[1].gpus"};
static const char *const metas[] = {"__index", "__newindex", "__len",    "__eq",   "__lt",   "__le",
                                    "__concat", "__call",    "__tostring", "__name", "__pairs", "__close",
                                    "__gc",     "__mode",    "__metatable", "__unm",  "__add",  "__idiv"};
static const char *const mbodies[] = {"function(...) return ... end",
                                      "function(t, k) return t end",
                                      "function() return S1 end",
                                      "function() error(S2) end",
                                      "function() return ('y'):rep(1 << 16) end",
                                      "function(a, b) return a == b end",
                                      "function(t) return 1e18 end",
                                      "function() return setmetatable({}, getmetatable(M1)) end",
                                      "'kv'",
                                      "1",
                                      "{}",
                                      "M2",
                                      "function(t, k) return M1[k] end",
                                      "function() while true do end end"};
static const char *const fmts[] = {"'%s'", "'%q'", "'%99d'", "'%a'", "'%5000s'", "'%-99.99f'", "'%c%c%c'",
                                   "'%i'", "'%x'", "'%'", "'%10.3q'", "'%s%s%s%s%s'"};

static void pattern(cur *c, sb *b)
{
    unsigned n = next(c) % 12;
    add(b, "('");
    for (unsigned i = 0; i < n; i++)
        add(b, "%s", PICK(c, ptoks));
    add(b, "')");
    if (next(c) % 4 == 0)
        add(b, ":rep(%u)", 1u + next(c) * 97u);
}

static void statement(cur *c, sb *b)
{
    unsigned op = next(c) % 22;
    add(b, "  pcall(function()\n    ");
    switch (op) {
    case 0:
        add(b, "S%u = (%s):rep(%s)", 1 + next(c) % 4, PICK(c, fills), PICK(c, sizes));
        break;
    case 1:
        add(b, "S%u = %s .. %s", 1 + next(c) % 4, PICK(c, strs), PICK(c, strs));
        break;
    case 2:
        add(b, "return string.find(%s, ", PICK(c, strs));
        pattern(c, b);
        add(b, ", %s, %s)", PICK(c, inits), next(c) & 1 ? "true" : "nil");
        break;
    case 3:
        add(b, "return string.match(%s, ", PICK(c, strs));
        pattern(c, b);
        add(b, ", %s)", PICK(c, inits));
        break;
    case 4:
        add(b, "local n = 0 for a, b2 in string.gmatch(%s, ", PICK(c, strs));
        pattern(c, b);
        add(b, ", %s) do n = n + 1 if n > %u then break end end", PICK(c, inits), next(c));
        break;
    case 5: {
        static const char *const repl[] = {"'%0%0'", "'%1'", "'x'", "'%'", "7", "true",
                                           "function(...) return select('#', ...) end",
                                           "function(x) return x end",
                                           "function() error('r') end",
                                           "function() return {} end",
                                           "{a = 'b', [1] = false}",
                                           "setmetatable({}, {__index = function(t, k) return k end})",
                                           "M1"};
        add(b, "return string.gsub(%s, ", PICK(c, strs));
        pattern(c, b);
        add(b, ", %s, %s)", PICK(c, repl), PICK(c, inits));
        break;
    }
    case 6:
        add(b, "M%u = setmetatable({}, {%s = %s, %s = %s})", 1 + next(c) % 2, PICK(c, metas), PICK(c, mbodies),
            PICK(c, metas), PICK(c, mbodies));
        break;
    case 7:
        add(b, "local f = pairs(%s) return f(%s, %s)", next(c) & 1 ? "cluster" : "cluster.rack_distance",
            PICK(c, vals), PICK(c, vals));
        break;
    case 8: {
        unsigned n = next(c);
        add(b, "return xpcall(function(...) return select('#', ...) end, %s", PICK(c, vals));
        for (unsigned i = 0; i < n; i++)
            add(b, ", %u", i);
        add(b, ")");
        break;
    }
    case 9:
        add(b, "print(%s, %s, %s)", PICK(c, strs), PICK(c, vals), PICK(c, fills));
        break;
    case 10:
        add(b, "error(%s, %u)", next(c) & 1 ? PICK(c, strs) : PICK(c, vals), next(c) % 3);
        break;
    case 11:
        add(b, "return string.format(%s, %s, %s, %s)", PICK(c, fmts), PICK(c, strs), PICK(c, sizes),
            PICK(c, vals));
        break;
    case 12: {
        static const char *const ops[] = {"%s:upper()", "%s:reverse()", "%s:sub(%s)", "%s:byte(1, %s)",
                                          "#%s + %s",   "%s < S1",      "%s == S2",   "(%s):rep(3, %s)",
                                          "utf8.len(%s, %s)", "utf8.codepoint(%s, 1, %s)", "tonumber(%s, %s)"};
        add(b, "return ");
        add(b, PICK(c, ops), PICK(c, strs), PICK(c, sizes));
        break;
    }
    case 13: {
        static const char *const ops[] = {"table.concat({%s, %s, %s}, S1)", "table.unpack({%s, %s}, 1, %s)",
                                          "table.sort({%s, %s, %s}, function(a, b) return true end)",
                                          "utf8.char(%s, %s, %s)", "string.char(%s, %s, %s)",
                                          "select(%s, %s, %s)", "rawequal(%s, %s, %s)",
                                          "rawlen(%s) + rawlen(%s) + rawlen(%s)",
                                          "table.move({%s}, 1, %s, %s)"};
        add(b, "return ");
        add(b, PICK(c, ops), PICK(c, vals), PICK(c, sizes), PICK(c, sizes));
        break;
    }
    case 14: {
        /* a generated chunk through the sandbox's load */
        static const char *const toks[] = {"return", "local", "x", "=", "1", "(", ")", "..", "'a'", "end",
                                           "function", "while", "true", "do", "[[", "]]", "--", "\\27Lua",
                                           "load", "S1", ",", "{", "}"};
        unsigned n = next(c) % 16;
        add(b, "local f = load(\"");
        for (unsigned i = 0; i < n; i++)
            add(b, "%s ", PICK(c, toks));
        add(b, "\", %s, %s, %s) return f and f()", next(c) & 1 ? "'=x'" : "S1", next(c) & 1 ? "'b'" : "'t'",
            PICK(c, vals));
        break;
    }
    case 15:
        add(b, "return coroutine.wrap(function() return S1 end)()");
        break;
    case 16:
        add(b, "return %s[%s], #%s, %s.nodes", PICK(c, vals), PICK(c, vals), PICK(c, vals), PICK(c, vals));
        break;
    case 17:
        add(b, "for k, v in pairs(%s) do S4 = tostring(k) .. tostring(v) end", PICK(c, vals));
        break;
    case 18:
        add(b, "return %s .. %s, %s < %s, -%s", PICK(c, vals), PICK(c, strs), PICK(c, vals), PICK(c, vals),
            PICK(c, vals));
        break;
    case 19:
        add(b, "return setmetatable(%s, %s), getmetatable(%s)", PICK(c, vals), PICK(c, vals), PICK(c, vals));
        break;
    case 20:
        add(b, "return collectgarbage(%s), tostring(%s), type(%s)", next(c) & 1 ? "'count'" : "'collect'",
            PICK(c, vals), PICK(c, vals));
        break;
    default:
        add(b, "local d = cluster.rack_distance or {} return d[%s], #d, d[1] and d[1][%s]", PICK(c, inits),
            PICK(c, inits));
        break;
    }
    add(b, "\n  end)\n");
}

static char *generate(cur *c, size_t *len)
{
    sb b = {0};
    add(&b, "S1, S2, S3, S4 = 'abc', ('a'):rep(100), '', 'x'\nM1, M2 = {}, {}\n"
            "function place(cluster, job)\n");
    for (int n = 0; c->off < c->n && n < 48; n++)
        statement(c, &b);
    add(&b, "  return {}\nend\n");
    *len = b.len;
    return b.p;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096)
        return 0;
    p3d_job job;
    p3d_job_init(&job);
    job.mesh.size[P3D_DIM_TP] = 2;
    p3d_placement *pl = NULL;
    char *err = NULL;
    size_t len;
    cur c = {data, size, 0};
    char *text = generate(&c, &len);
    if (getenv("P3D_FUZZ_VERBOSE"))
        fprintf(stderr, "%s\n", text);
    p3d_sandbox_limits lim = {.mem_bytes = (size_t)32 << 20, .instructions = 10000000, .cpu_seconds = 0.25};
    /* place() returns {}: it always fails validation, or earlier */
    if (p3d_policy_run_text("gen.lua", "gen.lua", text, len, cl, &job, &lim, &pl, &err) == 0 || !err || !*err ||
        pl)
        abort();
    if (getenv("P3D_FUZZ_VERBOSE"))
        fprintf(stderr, "-> %s\n", err);
    free(err);
    free(text);
    return 0;
}
