# SPDX-License-Identifier: BSD-3-Clause
# ring_lib.sh — for the --preflight TCP ring's tests (sourced after bad()
# is defined): a figure from a "preflight ..." line, and the check that a
# two-node ring measured both links of both nodes.
num() { sed -n "s/.*$1=\([0-9.e+-]*\).*/\1/p" <<<"$2"; }
pos() { python3 -c "import sys; sys.exit(0 if float('${1:-0}') > 0 else 1)" 2>/dev/null; }
# both_measured WHAT LINE_A LINE_B: bad() for each figure that is not > 0
both_measured() {
  local what=$1 i v f
  shift
  for i in 0 1; do
    local line=${1:-}
    shift
    for f in tcp_out_mbps tcp_in_mbps; do
      v=$(num $f "$line")
      pos "$v" || bad "$what: node $i $f=${v:-none}"
    done
  done
}
