#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The Debian packages (CPack, cmake/Packaging.cmake): par3drun (the core) and,
# when this build made their plugins, par3drun-curl and par3drun-pmix. The
# core depends on no library only a plugin needs (libcurl, libpmix): its
# Depends are read, and apt, simulating an install on a machine with nothing
# installed (an empty dpkg status), installs it without libcurl4 or libpmix2
# (while the pmix package does pull libpmix2: the check can fail). The docs
# are in the core package, every relative link of the installed README and
# docs resolving inside the installed tree. The packages run from wherever
# they are unpacked: dpkg-deb -x unpacks them into a temp dir, and the
# unpacked par3drun — with no P3D_DATA_DIR, no P3D_PLUGIN_DIR and an empty
# PATH — finds its policies, topologies, plugins and p3d-worker relative to
# itself: a dry run, a bundled topology, a plugin, and an emulated 4-rank
# worker job; the core alone names the package a URL policy needs. The man
# pages must list every option --help lists, and the completion must complete
# them.
set -u
: "${PAR3DRUN:?}" "${P3D_BUILD:?}"
for t in cpack dpkg-deb; do
    command -v "$t" >/dev/null || { echo "$t not installed (scripts/setup.sh installs it)"; exit 77; }
done
[[ -f $P3D_BUILD/CPackConfig.cmake ]] || { echo "FAIL: no $P3D_BUILD/CPackConfig.cmake"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }

t0=$(date +%s.%N)
if ! out=$(cd "$tmp" && cpack --config "$P3D_BUILD/CPackConfig.cmake" -G DEB -B "$tmp/pkg" 2>&1); then
    echo "FAIL: cpack -G DEB:"; echo "$out" | tail -20; exit 1
fi
ver=$("$PAR3DRUN" --version | awk '{print $2}')
deb=$(ls "$tmp"/pkg/par3drun_"$ver"_*.deb 2>/dev/null | head -1)
[[ -f $deb ]] || { echo "FAIL: no par3drun_${ver}_*.deb in $tmp/pkg:"; ls "$tmp/pkg"; exit 1; }
echo "ok: cpack built $(cd "$tmp/pkg" && ls *.deb | tr '\n' ' ')in $(echo "$(date +%s.%N) - $t0" | bc) s"
# the plugin packages: one for each library only plugins need, when built
declare -A plugdeb=([curl]=p3d_policy_fetch.so [pmix]=p3d_rdzv_pmix.so)
declare -A plugdep=([curl]=libcurl4 [pmix]=libpmix2)
for c in curl pmix; do
    p=$(ls "$tmp"/pkg/par3drun-"$c"_"$ver"_*.deb 2>/dev/null | head -1)
    if [[ ! -f $P3D_BUILD/plugins/${plugdeb[$c]} ]]; then
        [[ -z $p ]] || bad "par3drun-$c built although this build has no ${plugdeb[$c]}"
        continue
    fi
    [[ -f $p ]] || { bad "no par3drun-${c}_${ver}_*.deb"; continue; }
    d=$(dpkg-deb -f "$p" Depends)
    grep -q "par3drun (= $ver)" <<<"$d" && grep -q "${plugdep[$c]}" <<<"$d" ||
        bad "par3drun-$c Depends: $d (want par3drun (= $ver) and ${plugdep[$c]})"
    dpkg-deb -c "$p" | grep -q "usr/lib/par3drun/${plugdeb[$c]}" || bad "par3drun-$c lacks ${plugdeb[$c]}"
    grep -q "par3drun-$c" <<<"$(dpkg-deb -f "$deb" Recommends)" || bad "the core does not recommend par3drun-$c"
done

# control fields: name, version, and dependencies on what the core links,
# none on what only plugins need
[[ $(dpkg-deb -f "$deb" Package) == par3drun ]] || bad "Package is not par3drun"
[[ $(dpkg-deb -f "$deb" Version) == "$ver" ]] || bad "Version $(dpkg-deb -f "$deb" Version), par3drun --version says $ver"
deps=$(dpkg-deb -f "$deb" Depends)
for d in libhwloc libxml2 liblua5.4 libcjson libyaml; do
    grep -q "$d" <<<"$deps" || bad "Depends lacks $d: $deps"
done
grep -Eq 'libcurl|libpmix' <<<"$deps" && bad "the core package depends on a plugin's library: $deps"
dpkg-deb -c "$deb" | grep -E 'p3d_(policy_fetch|rdzv_etcd|rdzv_pmix)\.so' && bad "a libcurl/libpmix plugin is in the core package"
echo "ok: the core package depends on: $deps"

# apt on a machine with nothing installed (an empty dpkg status, this
# machine's package lists): what installing the core .deb would install
if command -v apt-get >/dev/null && ls /var/lib/apt/lists/*Packages* >/dev/null 2>&1; then
    mkdir -p "$tmp/apt/cache/archives/partial"; : >"$tmp/apt/status"
    sim() { apt-get -s -o Debug::NoLocking=1 -o Dir::State::status="$tmp/apt/status" -o Dir::Cache="$tmp/apt/cache" \
        "$@" 2>&1; }
    out=$(sim --no-install-recommends install "$deb")
    if ! grep -q '^Inst par3drun ' <<<"$out"; then
        bad "apt cannot install the core package on an empty system:"; tail -5 <<<"$out"
    elif grep -E '^Inst (libpmix2|libcurl4) ' <<<"$out"; then
        bad "apt installs libpmix2 or libcurl4 with the core package"
    else
        echo "ok: apt (simulated, empty system) installs par3drun with $(grep -c '^Inst ' <<<"$out") packages, neither libpmix2 nor libcurl4"
    fi
    p=$(ls "$tmp"/pkg/par3drun-pmix_"$ver"_*.deb 2>/dev/null | head -1)
    if [[ -f $p ]]; then
        grep -q '^Inst libpmix2 ' <<<"$(sim --no-install-recommends install "$deb" "$p")" ||
            bad "the simulation of par3drun-pmix does not install libpmix2 (the check above proves nothing)"
    fi
else
    echo "note: no apt package lists: the install was not simulated"
fi

root=$tmp/root
dpkg-deb -x "$deb" "$root" || { echo "FAIL: dpkg-deb -x"; exit 1; }
# the core alone: a URL policy names the package it needs
if [[ -f $P3D_BUILD/plugins/p3d_policy_fetch.so ]]; then
    out=$(cd "$tmp" && env -u P3D_PLUGIN_DIR -u P3D_DATA_DIR "$root/usr/bin/par3drun" --dry-run --policy http://127.0.0.1:9/p.lua \
        --cluster "$root/usr/share/par3drun/examples/clusters/2x-dgx-h100.json" --tp 8 2>&1)
    grep -q 'install the par3drun-curl package' <<<"$out" && echo "ok: the core alone names par3drun-curl for a URL policy" ||
        bad "the core alone, a URL policy: $out"
fi
for p in "$tmp"/pkg/par3drun-*_"$ver"_*.deb; do
    [[ -f $p ]] && { dpkg-deb -x "$p" "$root" || bad "dpkg-deb -x $p"; }
done
# the docs: every docs/ page, and every relative link of the installed
# README and docs resolves inside the installed tree
doc=$root/usr/share/doc/par3drun
for f in "$P3D_SRC"/docs/*.md; do
    [[ -f $doc/docs/$(basename "$f") ]] || bad "the package has no /usr/share/doc/par3drun/docs/$(basename "$f")"
done
nl=0
for md in "$doc"/README.md "$doc"/docs/*.md; do
    for l in $(grep -oE '\]\([^)#]+' "$md" | sed 's/^](//' | grep -vE '^[a-z]+:'); do
        nl=$((nl + 1))
        [[ -e $(dirname "$md")/$l ]] || bad "installed $(basename "$md") links to $l, not in the package"
    done
done
echo "ok: docs installed, $nl relative links of the installed README and docs resolve"
for f in usr/bin/par3drun usr/bin/p3d-worker usr/share/man/man1/par3drun.1 usr/share/man/man1/p3d-worker.1 \
    usr/share/bash-completion/completions/par3drun usr/share/bash-completion/completions/p3d-worker \
    usr/share/doc/par3drun/LICENSE usr/share/doc/par3drun/README.md usr/share/doc/par3drun/docs/launch.md \
    usr/share/par3drun/lua/par3d.lua usr/share/par3drun/lua/megatron.lua \
    usr/share/par3drun/lua/devicemesh.lua usr/share/par3drun/lua/naive.lua usr/share/par3drun/lua/par3d/mesh.lua \
    usr/share/par3drun/examples/topologies/dgx-h100.xml usr/share/par3drun/examples/clusters/2x-dgx-h100.json \
    usr/share/par3drun/examples/slurm/single-node.sbatch; do
    [[ -e $root/$f ]] || bad "the package has no /$f"
done
# every plugin and module this build made is in the package, nothing for tests
for so in "$P3D_BUILD"/plugins/p3d_*.so "$P3D_BUILD"/p3d-worker-cuda.so; do
    [[ -f $so ]] || continue
    [[ -f $root/usr/lib/par3drun/$(basename "$so") ]] || bad "the packages lack $(basename "$so")"
done
if dpkg-deb -c "$deb" | grep -E 'fake_nvml|fixture|/tests/|CMakeFiles'; then bad "test or build files packaged"; fi

# run from the unpacked tree: nothing from the build or the source tree,
# no Slurm allocation, and an empty PATH (p3d-worker only next to par3drun)
mkdir -p "$tmp/nobin" "$tmp/cwd"
unset P3D_DATA_DIR P3D_PLUGIN_DIR P3D_WORKER P3D_WORKER_CUDA_LIB
for v in $(compgen -e | grep '^SLURM_'); do unset "$v"; done
bin=$root/usr/bin
data=$root/usr/share/par3drun
run() { (cd "$tmp/cwd" && timeout 300 env PATH="$tmp/nobin" "$@"); }

out=$(run "$bin/par3drun" --dry-run --cluster "$data/examples/clusters/2x-dgx-h100.json" --tp 8 --pp 2 2>&1)
rc=$?
if ((rc != 0)) || ! grep -qE "policy megatron \($root/usr/.*share/par3drun/lua/megatron\.lua\)" <<<"$out" ||
    ! grep -q 'mesh: tp=8 pp=2 dp=1, world 16' <<<"$out"; then
    bad "dry run from the unpacked package (exit $rc):"; echo "$out" | head -5
else
    echo "ok: dry run from the package uses its own megatron.lua"
fi
out=$(run "$bin/par3drun" topo --topology dgx-h100.xml 2>&1)
grep -qE "^Source: $root/usr/.*share/par3drun/examples/topologies/dgx-h100\.xml" <<<"$out" &&
    echo "ok: bundled topology by name" || { bad "topo --topology dgx-h100.xml:"; echo "$out" | head -3; }
if [[ -f $root/usr/lib/par3drun/p3d_policy_fetch.so ]]; then
    out=$(run "$bin/par3drun" --dry-run --cluster "$data/examples/clusters/2x-dgx-h100.json" --tp 8 \
        --policy http://127.0.0.1:9/p.lua 2>&1)
    if grep -q 'policy URLs need' <<<"$out" || ! grep -q '127.0.0.1' <<<"$out"; then
        bad "the packaged fetch plugin was not loaded: $out"
    else
        echo "ok: the packaged policy fetch plugin is found (a refused connection, not a missing plugin)"
    fi
fi

out=$(run "$bin/par3drun" --emulate --cluster "$data/examples/clusters/2x-dgx-h100.json" \
    --tp 2 --pp 2 --dp 1 -- p3d-worker --backend cpu --verify --json --layers 4 --hidden 16 \
    --global-batch 8 --steps 2 2>&1)
rc=$?
n=$(grep -c '{"rank":' <<<"$out")
if ((rc != 0 || n != 4)) || ! grep -q '"summary":true.*"verify":"pass"' <<<"$out"; then
    bad "emulated p3d-worker job from the package (exit $rc, $n rank lines):"; echo "$out" | tail -10
else
    echo "ok: emulated 4-rank p3d-worker job, p3d-worker found next to par3drun with an empty PATH"
fi

# the CUDA module is found in <prefix>/lib/par3drun: without a GPU the worker
# loads it and says "no GPU"; with one it trains
if [[ -f $root/usr/lib/par3drun/p3d-worker-cuda.so ]]; then
    out=$(RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=$((20000 + RANDOM % 20000)) \
        run "$bin/p3d-worker" --backend cuda --steps 1 --layers 2 --hidden 16 --global-batch 4 2>&1)
    if grep -q 'cannot be loaded' <<<"$out"; then
        bad "the packaged p3d-worker does not find its CUDA module: $out"
    else
        echo "ok: the packaged CUDA module loads ($(tail -1 <<<"$out" | cut -c1-100))"
    fi
fi

# man pages: every option --help shows is in the page (generated from it)
for prog in par3drun p3d-worker; do
    page=$root/usr/share/man/man1/$prog.1
    missing=""
    for o in $({ "$bin/$prog" --help; [[ $prog != par3drun ]] || "$bin/$prog" runs --help; } |
        sed -n 's/^  --\([a-z0-9][a-z0-9_-]*\).*/\1/p'); do
        grep -qF "\\fB\\-\\-${o//-/\\-}\\fR" "$page" || missing+=" --$o"
    done
    [[ -z $missing ]] && echo "ok: $prog(1) lists every --help option (par3drun: and runs --help's)" ||
        bad "$prog(1) lacks$missing"
    if command -v man >/dev/null; then
        MANWIDTH=80 man -l "$page" 2>&1 | grep -q '^SYNOPSIS' || bad "man -l $page does not render a SYNOPSIS"
    fi
done
run "$bin/par3drun" --help >"$tmp/help"
grep -q '^ *par3drun cluster' "$tmp/help" || bad "par3drun --help does not show the cluster subcommand"
head -10 "$tmp/help" | grep -q -- "--version" || bad "par3drun --help's first 10 lines do not name --version"
head -1 "$tmp/help" | grep -q "^par3drun $ver " || bad "par3drun --help's first line does not give the version $ver"

# bash completion (when bash-completion is installed to load it)
bc=/usr/share/bash-completion/bash_completion
if [[ -f $bc ]]; then
    got=$(PATH=$PATH:$bin bash -c '
        source "$1"; source "$2/par3drun"; source "$2/p3d-worker"
        c() { local f=$1; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMP_LINE="$*"
              COMP_POINT=${#COMP_LINE}; COMPREPLY=(); $f; echo "${COMPREPLY[*]}"; }
        c _par3drun par3drun --clu; c _par3drun par3drun cl; c _par3drun par3drun --bind c
        c _p3d_worker p3d-worker --back; c _par3drun par3drun ru; c _par3drun par3drun runs --pr
        c _par3drun par3drun --str' _ "$bc" "$root/usr/share/bash-completion/completions")
    want=$'--cluster\ncluster\ncore\n--backend\nruns\n--prune\n--strict'
    [[ $got == "$want" ]] && echo "ok: bash completion" || bad "bash completion gave: $(tr '\n' '|' <<<"$got")"
else
    echo "note: bash-completion not installed, completion not exercised"
fi
exit $fail
