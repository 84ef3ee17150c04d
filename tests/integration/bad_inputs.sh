# SPDX-License-Identifier: BSD-3-Clause
# Data-driven bad-input corpus (tests/bad/cases.tsv, docs/limits.md): every
# case runs par3drun with malformed input and must exit with the expected
# code, say the expected substring on stderr, not die of a signal, print no
# sanitizer report, and finish within the time bound.
#
# cases.tsv columns (tab-separated; '#' lines are comments):
#   name  args  exit  substring  [env K=V ...]
# args placeholders: @BAD@ tests/bad/files, @EX@ examples, @C2@ the 2-node
# example cluster, @TMP@ a scratch dir holding generated inputs (a 1 GiB
# sparse file, a symlink loop, a FIFO, a directory), removed at the end.
set -u
src=${P3D_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
bin=${PAR3DRUN:?PAR3DRUN must name the par3drun binary}
cases=$src/tests/bad/cases.tsv
limit=${P3D_BAD_TIMEOUT:-60}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/p3d-bad.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# generated inputs: too big, or not files at all, to be committed
truncate -s 1G "$tmp/huge.json"
truncate -s 1G "$tmp/huge.xml"
truncate -s 1G "$tmp/huge.lua"
truncate -s 1G "$tmp/huge.conf"
# an NCCL topology XML over its 4 MiB bound (blank space inside <system>)
{ printf '<system version="1">\n'; head -c 5242880 /dev/zero | tr '\0' ' '; printf '</system>\n'; } >"$tmp/huge-nccl.xml"
ln -s "$tmp/loop-b.json" "$tmp/loop-a.json"
ln -s "$tmp/loop-a.json" "$tmp/loop-b.json"
mkdir "$tmp/dir.json"
mkfifo "$tmp/fifo.json"
# --rdzv-token-file as ssh treats a private key (docs/limits.md): another
# user could read it, or it is no file at all (a FIFO would block)
printf 'bad-inputs-token-0123456789\n' >"$tmp/token-open"
chmod 0644 "$tmp/token-open"
printf 'bad-inputs-token-0123456789\n' >"$tmp/token-group"
chmod 0640 "$tmp/token-group"
mkfifo -m 0600 "$tmp/token-fifo"
# --log-dir / --run-dir another user could have prepared (docs/limits.md)
mkdir "$tmp/logdir-open" "$tmp/logdir-planted" "$tmp/rundir-open"
chmod 0777 "$tmp/logdir-open"
chmod 0755 "$tmp/rundir-open"
ln -s "$tmp/huge.json" "$tmp/logdir-planted/rank-0.log"
# a cluster file over the 1,048,576-node bound, built from entries that
# each stay under the hostlist cap (docs/limits.md)
{
    printf '{"nodes": [\n'
    for i in 0 1 2 3 4; do
        printf '{"name": "r%d-n[000000-249999]", "topology": "cpu-only.xml"},\n' "$i"
    done
    printf '{"name": "last", "topology": "cpu-only.xml"}]}\n'
} >"$tmp/too-many-nodes.json"

# a 1,048,576-node cluster for plan, over its 8,192-node bound (docs/limits.md)
printf '{"nodes": [{"name": "p[0000001-1048576]", "topology": "%s"}]}\n' \
    "$src/examples/topologies/dgx-h100.xml" >"$tmp/plan-1m.json"

# three DGX H100s in one rack, for the --spares hook cases
printf '{"nodes": [{"name": "dgx-h100-[01-03]", "topology": "%s", "rack": "r1"}]}\n' \
    "$src/examples/topologies/dgx-h100.xml" >"$tmp/three.json"

# an nvidia-smi text one column over the 1,024-column bound
python3 - "$tmp/gpus-1025.txt" <<'PY' || exit 1
import sys
n = 1025
with open(sys.argv[1], "w") as f:
    f.write("\t" + "\t".join("GPU%d" % i for i in range(n)) + "\n")
    for i in range(2):
        f.write("GPU%d\t" % i + "\t".join(" X " if i == j else "SYS" for j in range(n)) + "\n")
PY

pass=0 fail=0
while IFS=$'\t' read -r name args want substr envs || [ -n "$name" ]; do
    case "$name" in ''|'#'*) continue ;; esac
    args=${args//@BAD@/$src/tests/bad/files}
    args=${args//@EX@/$src/examples}
    args=${args//@C2@/$src/examples/clusters/2x-dgx-h100.json}
    args=${args//@TMP@/$tmp}
    read -r -a argv <<<"$args"
    envv=()
    [ -n "${envs:-}" ] && read -r -a envv <<<"$envs"
    start=$(date +%s.%N)
    env ${envv[@]+"${envv[@]}"} timeout -k 5 "$limit" "$bin" "${argv[@]}" \
        </dev/null >"$tmp/out" 2>"$tmp/err"
    rc=$?
    secs=$(echo "$(date +%s.%N) - $start" | bc)
    why=""
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
        why="timed out after ${limit}s"
    elif [ "$rc" -gt 128 ]; then
        why="killed by signal $((rc - 128))"
    elif grep -qE 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:' "$tmp/err"; then
        why="sanitizer report"
    elif [ "$rc" -ne "$want" ]; then
        why="exit $rc, expected $want"
    elif ! grep -qF -- "$substr" "$tmp/err"; then
        why="stderr lacks '$substr'"
    fi
    if [ -n "$why" ]; then
        echo "FAIL $name: $why ($secs s)"
        echo "  par3drun $args"
        sed 's/^/  stderr: /' "$tmp/err" | head -n 8
        fail=$((fail + 1))
    else
        echo "ok $name ($secs s)"
        pass=$((pass + 1))
    fi
done <"$cases"
echo "bad inputs: $pass passed, $fail failed"
[ "$pass" -ge 50 ] || { echo "FAIL: fewer than 50 cases ran"; exit 1; }
[ "$fail" -eq 0 ]
