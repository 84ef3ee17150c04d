# SPDX-License-Identifier: BSD-3-Clause
# Bad input to --dry-run: one line "par3drun: <msg>" on stderr, exit 2,
# nothing crashes or hangs. Error-level checks: exit 2 with the report.
. "$(dirname "$0")/lib/dryrun_lib.sh"
C2=examples/clusters/2x-dgx-h100.json

# first_line OUT : stderr's first line has the par3drun: prefix
first_line() {
    if head -n1 "$TMPD/$1.err" | grep -q '^par3drun: '; then echo "ok $1: one-line message first"; else
        echo "FAIL $1: stderr does not start with 'par3drun: '"; fail=1; fi
}

dry nodiv 2 --cluster $C2 --tp 3
err_has nodiv "mesh does not divide the world: 16 GPUs is not a multiple of tp*cp*pp = 3"
first_line nodiv

dry toobig 2 --cluster $C2 --tp 8 --dp 4
err_has toobig "larger than the 16 GPUs available"

dry nopolicy 2 --cluster $C2 --tp 8 --policy no-such-policy
err_has nopolicy "no-such-policy"
first_line nopolicy

dry format 2 --cluster $C2 --tp 8 --format xml
err_has format "--format: expected text, json, svg or html"

dry nocluster 2 --cluster examples/clusters/no-such.json --tp 8
err_has nocluster "no-such.json"

printf '{"nodes": [ {"name": "n[1-2]", "topology": "dgx-h100.xml",}\n' >"$TMPD/bad.json"
dry badjson 2 --cluster "$TMPD/bad.json" --tp 8
err_has badjson "bad.json"
first_line badjson

printf '{"nodes": [ {"name": "n[1-", "topology": "dgx-h100.xml"} ] }\n' >"$TMPD/badhost.json"
dry badhost 2 --cluster "$TMPD/badhost.json" --tp 8
err_has badhost "badhost.json"

dry badtopo 2 --topology no/such/topology.xml --tp 8
err_has badtopo "no/such/topology.xml"

dry badorder 2 --cluster $C2 --tp 8 --order tp-xx-pp
err_has badorder "unknown dimension 'xx'"

printf 'function place(cluster, job)\n  return {\nend\n' >"$TMPD/syntax.lua"
dry luasyntax 2 --cluster $C2 --tp 8 --policy "$TMPD/syntax.lua"
err_has luasyntax "syntax.lua:"

printf 'function place(cluster, job)\n  while true do end\nend\n' >"$TMPD/loop.lua"
dry lualoop 2 --cluster $C2 --tp 8 --policy "$TMPD/loop.lua"
err_has lualoop "loop.lua"

dry outdir 2 --cluster $C2 --tp 8 --output /nonexistent-dir/report.txt
err_has outdir "--output /nonexistent-dir/report.txt"

# Error-level checks: the report is printed AND the exit is 2.
dry batch 2 --cluster $C2 --tp 8 --pp 2 --global-batch 4 --micro-batch 8
has batch 'DP_GT_BATCH|error'
err_has batch "error-level check"
dry nofit 2 --topology examples/topologies/dgx-h100.xml --tp 8 --model llama2-70b
has nofit 'MODEL_DOES_NOT_FIT'
dry layers 2 --cluster examples/clusters/64x-dgx-h100-4racks.json --tp 8 --pp 64 --model llama3-8b \
    --format json
pycheck layers 'assert any(c["code"] == "PP_GT_LAYERS" and c["severity"] == "error" for c in d["checks"])' \
    "pp=64 > 32 layers of llama3-8b: PP_GT_LAYERS"
exit $fail
