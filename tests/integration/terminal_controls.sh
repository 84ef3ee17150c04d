#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Issue 28: no string from outside reaches the terminal raw. Every option
# of every subcommand that takes a value gets a hostile value (ESC, BEL,
# CR, a bidi override U+202E, a C1 CSI U+009B and invalid UTF-8); so do
# the names inside cluster files (node, rack, NVLink domain), kubectl
# nodes that are skipped, a hostlist, file names, a policy's name, and
# the hostname and version of a JOIN sent to a rendezvous leader, Slurm
# topology.yaml switch/block names, a policy's print output, notes and
# errors, env-var values, and a launch on nodes so named. stdout and stderr of each run must be valid
# UTF-8 without a C0 control (but newline and tab), DEL, C1 control or
# bidi override; JSON output must parse, with invalid bytes as U+FFFD.
set -euo pipefail
: "${PAR3DRUN:?run through ctest}" "${P3D_SRC:?}"
T=$(mktemp -d /tmp/p3d-termctl.XXXXXX)
trap 'rm -rf "$T"' EXIT
export P3D_DATA_DIR=$P3D_SRC
cd "$T"
python3 - "$PAR3DRUN" "$P3D_SRC" "$T" <<'PY'
import json, os, re, socket, struct, subprocess, sys, time
bin_, src, tmp = sys.argv[1], sys.argv[2], sys.argv[3]
H = "x\x1b[2J\x07\rY\u202eZ\u009b1m"          # valid UTF-8 hostile text
HB = H.encode() + b"\xff\xc3(\xe2\x80"           # plus invalid UTF-8
BIDI = re.compile("[\u0080-\u009f\u202a-\u202e\u2066-\u2069]")
failures, runs = [], 0

def check(what, out):
    """out: bytes written by the program to the terminal."""
    bad = sorted({c for c in out if (c < 0x20 and c not in (9, 10)) or c == 0x7f})
    try:
        s = out.decode("utf-8")
    except UnicodeDecodeError as e:
        failures.append("%s: invalid UTF-8 at byte %d: %r" % (what, e.start, out[max(0, e.start - 20):e.start + 20]))
        return
    if bad:
        i = next(k for k, c in enumerate(out) if c in bad)
        failures.append("%s: raw control bytes %s near %r" % (what, bad, out[max(0, i - 30):i + 30]))
    m = BIDI.search(s)
    if m:
        failures.append("%s: raw U+%04X near %r" % (what, ord(m.group()), s[max(0, m.start() - 30):m.start() + 30]))

def run(what, args, env=None, timeout=30):
    global runs
    runs += 1
    e = dict(os.environ, NO_COLOR="1")
    e.update(env or {})
    try:
        p = subprocess.run([bin_] + args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, env=e, timeout=timeout, cwd=tmp)
    except subprocess.TimeoutExpired as t:
        failures.append("%s: still running after %d s" % (what, timeout))
        return None
    if p.returncode < 0:
        failures.append("%s: killed by signal %d" % (what, -p.returncode))
    for bad in (b"AddressSanitizer", b"LeakSanitizer", b"runtime error:"):
        if bad in p.stderr:
            failures.append("%s: %s report: %r" % (what, bad.decode(), p.stderr[-600:]))
    check(what + " (stdout)", p.stdout)
    check(what + " (stderr)", p.stderr)
    return p

def arg(b):
    return os.fsdecode(b)

cl = src + "/examples/clusters/2x-dgx-h100.json"
# 1. every option that takes a value, in every subcommand, gets the hostile value
helpt = subprocess.run([bin_, "--help"], stdout=subprocess.PIPE, text=True).stdout
opts = re.findall(r"^  (--[a-z0-9-]+) [A-Z]", helpt, re.M)
assert len(opts) > 30, "too few options found in --help: %r" % opts
modes = {"dry-run": ["--dry-run", "--cluster", cl, "--tp", "8"],
         "plan": ["plan", "--cluster", cl, "--model", "llama3-8b"],
         "topo": ["topo"],
         "cluster": ["cluster", "--cluster", cl],
         "launch": ["--emulate", "--cluster", cl, "--tp", "8", "--nproc-per-node", "8", "--rdzv-timeout", "5",
                    "--timeout", "10"]}
for mode, base in modes.items():
    for o in opts:
        if o in ("--health-check",) and mode == "launch":
            continue  # a shell command is run, not quoted: case 5 below covers its output
        for v in (arg(HB), "k=" + arg(HB), "8" + arg(HB)):
            tail = ["--", "/bin/true"] if mode == "launch" else []
            run("%s %s %r" % (mode, o, v), base + [o, v] + tail)
    # an unknown option named with controls
    run("%s unknown option" % mode, base + ["--" + arg(HB)])

# 2. names inside a cluster file: node, rack, NVLink domain, topology file
def jstr(b):
    return json.dumps(b.decode("utf-8", "surrogateescape"), ensure_ascii=True)
topo = src + "/placement/topo/data/dgx-h100.xml" if os.path.exists(src + "/placement/topo/data/dgx-h100.xml") else "dgx-h100.xml"
nodes = [{"name": "n1" + H, "topology": "dgx-h100.xml", "rack": "r" + H, "nvl_domain": "d" + H},
         {"name": "n2", "topology": "dgx-h100.xml", "rack": "r2"}]
open(tmp + "/c.json", "w").write(json.dumps({"nodes": nodes}))
# the same names as raw invalid UTF-8 bytes (cJSON keeps them)
raw = (b'{"nodes": [{"name": "n1\xff\xc3(", "topology": "dgx-h100.xml", "rack": "r\xe2\x80\xae\xff", '
       b'"nvl_domain": "d\xc2\x9b\xfe"}, {"name": "n2", "topology": "dgx-h100.xml", "rack": "r2"}]}')
open(tmp + "/raw.json", "wb").write(raw)
bad_topo = {"nodes": [{"name": "n1", "topology": "no" + H + ".xml"}]}
open(tmp + "/badtopo.json", "w").write(json.dumps(bad_topo))
for f in ("c.json", "raw.json", "badtopo.json"):
    run("cluster %s" % f, ["cluster", "--cluster", tmp + "/" + f])
    run("cluster --format json %s" % f, ["cluster", "--cluster", tmp + "/" + f, "--format", "json"])
    run("dry-run %s" % f, ["--dry-run", "--cluster", tmp + "/" + f, "--tp", "8"])
    run("plan %s" % f, ["plan", "--cluster", tmp + "/" + f, "--model", "llama3-8b"])
    run("dry-run --exclude %s" % f, ["--dry-run", "--cluster", tmp + "/" + f, "--tp", "8", "--exclude", "n2" + H])

# 3. kubectl get nodes: a skipped CPU node and a GPU node with hostile names
k8s = {"apiVersion": "v1", "kind": "List", "items": [
    {"kind": "Node", "metadata": {"name": "cpu" + H, "labels": {}}, "status": {"capacity": {}}},
    {"kind": "Node", "metadata": {"name": "gpu" + H, "labels": {
        "nvidia.com/gpu.count": "8", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3" + H}},
     "status": {"capacity": {"nvidia.com/gpu": "8"}}},
    {"kind": "Node" + H, "metadata": {"name": "odd" + H}}]}
open(tmp + "/k8s.json", "w").write(json.dumps(k8s))
k8s["items"].pop()
open(tmp + "/k8s2.json", "w").write(json.dumps(k8s))
for f in ("k8s.json", "k8s2.json"):
    run("cluster %s" % f, ["cluster", "--cluster", tmp + "/" + f])
    run("dry-run %s" % f, ["--dry-run", "--cluster", tmp + "/" + f, "--tp", "8"])

# 4. hostlists from the environment and files named with controls
for hl in ("n[1-" + arg(HB) + "]", "n" + arg(HB), "n[1-2" + arg(HB)):
    run("SLURM_JOB_NODELIST %r" % hl, ["--dry-run", "--cluster", cl, "--tp", "8"],
        env={"SLURM_JOB_NODELIST": hl, "SLURM_JOB_ID": "1" + arg(HB)})
pol = tmp + "/ev" + H + ".lua"
open(pol, "w").write("function place(c, j) return par3d.place_nested(c, j) end\n")
run("policy named with controls", ["--dry-run", "--cluster", cl, "--tp", "8", "--policy", pol])
open(tmp + "/broken.lua", "w").write("error('boom" + H + "')\n")
run("policy error with controls", ["--dry-run", "--cluster", cl, "--tp", "8", "--policy", tmp + "/broken.lua"])
for env in ("JOB_COMPLETION_INDEX", "SLURM_NODEID", "SLURM_PROCID", "P3D_RDZV_FANOUT", "SLURM_NNODES",
            "P3D_RDZV_TOKEN", "SLURM_JOB_NUM_NODES", "OMPI_COMM_WORLD_RANK", "PMIX_RANK"):
    run("env %s" % env, ["--emulate", "--cluster", cl, "--tp", "8", "--nproc-per-node", "8", "--timeout", "10",
                         "--", "/bin/true"], env={env: "1" + arg(HB)})

# 5. a health check whose output is hostile: quoted in par3drun's message
run("health-check output", ["--emulate", "--cluster", cl, "--tp", "8", "--nproc-per-node", "8", "--timeout", "20",
                            "--health-check", "printf 'sick\\033[2J\\007\\r\\342\\200\\256\\377'; exit 3",
                            "--", "/bin/true"], timeout=60)

# 6. a JOIN to a real leader: a stranger's (no token: sent without the
#    handshake, refused before a byte of it is decoded, so its hostname
#    never shows), and one after a good handshake (the token: the
#    version's controls are escaped in the refusal)
def s(b):
    return struct.pack(">I", len(b)) + b
# the wire protocol the binary speaks, from its source
PROTO = int(re.search(r"#define P3D_WIRE_PROTO (\d+)",
                      open(os.path.join(os.environ["P3D_SRC"], "launcher/wire/wire.h")).read()).group(1))
def frame(t, body):
    return struct.pack(">I", len(body) + 1) + t + body
def join_body(version, host):
    return struct.pack(">I", PROTO) + s(version) + s(b"") + struct.pack(">ii", 2, 1) + s(host) + \
        s(b"127.0.0.1") + struct.pack(">ii", 0, 0)
def read_frame(c):
    h = b""
    while len(h) < 4:
        h += c.recv(4 - len(h))
    n = struct.unpack(">I", h)[0]
    b = b""
    while len(b) < n:
        b += c.recv(n - len(b))
    return b[:1], b[1:]
def authed_join(c, token, version, host):
    """the handshake of wire_chan.c as the initiator, then the JOIN tagged
    with the session key (frame number 0, from the initiator)"""
    import hashlib, hmac
    ni = os.urandom(32)
    c.sendall(frame(b"A", struct.pack(">II", PROTO, 1) + ni))
    t, body = read_frame(c)
    na = body[:32]
    tr = ni + na + struct.pack(">II", 1, PROTO)
    c.sendall(frame(b"E", hmac.new(token, b"p3d-initiator" + tr, hashlib.sha256).digest()))
    sk = hmac.new(token, b"p3d-session" + tr, hashlib.sha256).digest()
    jb = join_body(version, host)
    tag = hmac.new(sk, b"i" + struct.pack(">Q", 0) + b"J" + jb, hashlib.sha256).digest()
    c.sendall(frame(b"J", jb + tag))
tok = b"termctl-test-token-0123456789"
for token, version in ((b"wrong-token-0123456789", b"0.1.0"), (tok, b"9" + HB)):
    sk = socket.socket(); sk.bind(("127.0.0.1", 0)); port = sk.getsockname()[1]; sk.close()
    env = dict(os.environ, P3D_RDZV_TOKEN=tok.decode())
    leader = subprocess.Popen([bin_, "--rdzv", "static:127.0.0.1:%d" % port, "--nnodes", "2", "--node-rank", "0",
                               "--rdzv-timeout", "4", "--nproc-per-node", "1", "--", "/bin/true"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=tmp)
    for _ in range(100):
        try:
            c = socket.create_connection(("127.0.0.1", port)); break
        except OSError:
            time.sleep(0.05)
    if token == tok:
        authed_join(c, token, version, b"host" + HB)
    else:
        c.sendall(frame(b"J", join_body(version, b"host" + HB)))
    reply = b""
    try:
        c.settimeout(5)
        while True:
            d = c.recv(65536)
            if not d:
                break
            reply += d
    except OSError:
        pass
    c.close()
    out, err = leader.communicate(timeout=30)
    runs += 1
    what = "leader refusing JOIN (%s)" % ("no token" if token != tok else "version")
    check(what + " (stdout)", out)
    check(what + " (stderr)", err)
    # frame length, type, string length; after a handshake the tag ends it
    check(what + " (the REFUSE sent back)", reply[9:-32] if token == tok else reply[9:])
    if b"refused" not in err:
        failures.append("%s: no refusal line: %r" % (what, err[-400:]))
    if token == tok and b"version mismatch" not in err:
        failures.append("%s: the JOIN after the handshake was not judged: %r" % (what, err[-400:]))
    if token != tok and b"host" in err:
        failures.append("%s: a stranger's JOIN was decoded (its host is named): %r" % (what, err[-400:]))

# 7. Slurm topology.yaml: switch, block and topology names with controls
#    (YAML escapes, so the parser hands them over) and as raw invalid UTF-8
yq = '"sw\\e[2J\\a\\rY\\u202eZ\\x9b"'
open(tmp + "/topo.yaml", "w").write(
    "- topology: %s\n  cluster_default: True\n  tree:\n    switches:\n    - switch: %s\n"
    "      nodes: dgx-h100-[01-02]\n" % (yq, yq))
open(tmp + "/blk.yaml", "w").write(
    "- topology: t1\n  cluster_default: True\n  block:\n    block_sizes:\n      - 2\n    blocks:\n"
    "    - block: %s\n      nodes: dgx-h100-[01-02]\n" % yq)
# the parser refuses C0 controls and escapes; bidi, C1 and invalid UTF-8
# bytes written raw get through to racks and domains
RY = b"s\xe2\x80\xaeZ\xc2\x9b\xff\xc3("
open(tmp + "/raw.yaml", "wb").write(
    b"- topology: t\xff1\n  cluster_default: True\n  tree:\n    switches:\n    - switch: " + RY +
    b"\n      nodes: dgx-h100-[01-02]\n")
open(tmp + "/rawblk.yaml", "wb").write(
    b"- topology: t1\n  cluster_default: True\n  block:\n    block_sizes:\n      - 2\n    blocks:\n"
    b"    - block: b" + RY + b"\n      nodes: dgx-h100-[01-02]\n")
open(tmp + "/rawnodes.yaml", "wb").write(
    b"- topology: t1\n  cluster_default: True\n  tree:\n    switches:\n    - switch: s1\n"
    b"      nodes: dgx-h100-[01-02" + HB + b"]\n")
for f in ("topo.yaml", "blk.yaml", "raw.yaml", "rawblk.yaml", "rawnodes.yaml"):
    for fmt in ("text", "json"):
        run("dry-run --slurm-topology %s --format %s" % (f, fmt),
            ["--dry-run", "--cluster", cl, "--tp", "8", "--slurm-topology", tmp + "/" + f, "--format", fmt])
    run("cluster --slurm-topology %s" % f, ["cluster", "--cluster", cl, "--slurm-topology", tmp + "/" + f])

# 8. a policy's print output, its notes and an error naming a node
open(tmp + "/chatty.lua", "w").write(
    "function place(c, j)\n  print('said' .. %s)\n  local r, n = par3d.place_nested(c, j)\n"
    "  n = n or {}\n  n[#n + 1] = 'note' .. %s\n  return r, n\nend\n" % (json.dumps(H), json.dumps(H)))
open(tmp + "/badret.lua", "w").write("function place(c, j) return {{node = 'n' .. %s, gpu = 0}} end\n" % json.dumps(H))
for pol_f in ("chatty.lua", "badret.lua"):
    for fmt in ("text", "json"):
        run("policy %s --format %s" % (pol_f, fmt),
            ["--dry-run", "--cluster", cl, "--tp", "8", "--policy", tmp + "/" + pol_f, "--format", fmt])
    run("plan policy %s" % pol_f, ["plan", "--cluster", cl, "--model", "llama3-8b", "--policy", tmp + "/" + pol_f])

# names with C0 controls are refused (hostlist syntax); C1 and bidi pass
BN = "n1\u202eZ\u009b1m\u2066"
open(tmp + "/bidi.json", "w").write(json.dumps({"nodes": [{"name": BN, "topology": "dgx-h100.xml", "rack": "r" + BN},
                                                          {"name": "n2", "topology": "dgx-h100.xml", "rack": "r2"}]}))
# 9. JSON output is valid JSON and valid UTF-8: invalid bytes become U+FFFD,
#    controls come back as the code points they were
for what, args in (("cluster --format json raw.json", ["cluster", "--cluster", tmp + "/raw.json", "--format", "json"]),
                   ("dry-run --format json raw.json", ["--dry-run", "--cluster", tmp + "/raw.json", "--tp", "8",
                                                       "--format", "json"]),
                   ("dry-run --format json bidi.json", ["--dry-run", "--cluster", tmp + "/bidi.json", "--tp", "8",
                                                        "--format", "json"])):
    p = run(what, args)
    if p is None or p.returncode != 0:
        failures.append("%s: exit %s: %r" % (what, p and p.returncode, p and p.stderr[-300:]))
        continue
    try:
        doc = json.loads(p.stdout.decode("utf-8"))
    except ValueError as e:
        failures.append("%s: not JSON: %s" % (what, e))
        continue
    flat = json.dumps(doc, ensure_ascii=False)
    want = "n1\ufffd\ufffd(" if "raw" in what else BN
    if want not in flat:
        failures.append("%s: the node name does not come back as %r" % (what, want))

# 10. a launch on nodes whose names hold bidi marks, C1 controls or invalid
#     UTF-8: the job line, the agents' notes, the bindings report, the root
#     cause and the story all quote them
for f in ("bidi.json", "raw.json"):
    for cmd in ("exit 3", "kill -9 $$", "echo out"):
        for extra in (["--verbose"], ["--report-bindings", "--tag-output"]):
            run("launch on %s: %s %s" % (f, cmd, extra[0]),
                ["--emulate", "--cluster", tmp + "/" + f, "--tp", "8", "--nproc-per-node", "8", "--timeout", "10"] +
                extra + ["--", "sh", "-c", cmd], timeout=60)

if failures:
    print("\n".join("FAIL: " + f for f in failures[:40]))
    print("%d of %d runs printed raw controls" % (len(failures), runs))
    sys.exit(1)
print("terminal_controls: %d runs, stdout and stderr free of raw controls" % runs)
PY
