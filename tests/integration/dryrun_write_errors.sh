# SPDX-License-Identifier: BSD-3-Clause
# Every report format is streamed (written as it is made): a write that
# fails, to --output or to stdout, is an error naming where and which
# report (exit 1), never a short report and exit 0.
set -u
: "${PAR3DRUN:?}" "${P3D_SRC:?}"
[ -w /dev/full ] || { echo "skip: no /dev/full"; exit 77; }
unset SLURM_JOB_NODELIST
cd "$P3D_SRC" || exit 1
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
args=(--dry-run --cluster examples/clusters/64x-dgx-h100-4racks.json --tp 8 --pp 4)
for f in text json svg html; do
    "$PAR3DRUN" "${args[@]}" --format $f --output /dev/full 2>"$tmp/err"; rc=$?
    if [ $rc = 1 ] && grep -q "output /dev/full: writing the $f report failed: No space left on device" "$tmp/err"; then
        echo "ok --output /dev/full --format $f: exit 1, said so"
    else
        echo "FAIL --output /dev/full --format $f: exit $rc"; cat "$tmp/err"; fail=1
    fi
    "$PAR3DRUN" "${args[@]}" --format $f >/dev/full 2>"$tmp/err"; rc=$?
    if [ $rc = 1 ] && grep -q "stdout: writing the $f report failed" "$tmp/err"; then
        echo "ok stdout on /dev/full --format $f: exit 1, said so"
    else
        echo "FAIL stdout on /dev/full --format $f: exit $rc"; cat "$tmp/err"; fail=1
    fi
    # and the same report written whole to a file and to a pipe
    "$PAR3DRUN" "${args[@]}" --format $f --output "$tmp/a.$f" 2>/dev/null
    "$PAR3DRUN" "${args[@]}" --format $f 2>/dev/null | cat >"$tmp/b.$f"
    if [ -s "$tmp/a.$f" ] && cmp -s "$tmp/a.$f" "$tmp/b.$f"; then
        echo "ok --format $f: --output and stdout give the same bytes"
    else
        echo "FAIL --format $f: --output and stdout differ"; fail=1
    fi
done
exit $fail
