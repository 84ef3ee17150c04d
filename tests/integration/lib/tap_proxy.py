#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""A tap on loopback for rdzv_tap.sh: it accepts one agent, connects to
the real leader for it, passes every byte both ways and writes what each
side sent to OUT.up (agent -> leader) and OUT.down (leader -> agent).

  tap_proxy.py MODE LEADER_PORT LISTEN_PORT OUT

MODE: tap   pass everything unchanged
      dup   pass everything, and send the agent's third frame (its first
            after the handshake: the JOIN) to the leader twice (a replay
            later on the same connection)
"""
import os, select, struct, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from loopback_proxy import accept_and_dial

mode, lport, pport, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
a, up = accept_and_dial(lport, pport)
fup, fdown = open(out + ".up", "wb"), open(out + ".down", "wb")
abuf, nframes = b"", 0
while True:
    r, _, _ = select.select([a, up], [], [], 60)
    if not r:
        break
    if a in r:
        d = a.recv(65536)
        if not d:
            break
        fup.write(d)
        if mode != "dup":
            up.sendall(d)
            continue
        abuf += d
        while len(abuf) >= 4 and len(abuf) >= 4 + struct.unpack(">I", abuf[:4])[0]:
            n = 4 + struct.unpack(">I", abuf[:4])[0]
            fr, abuf = abuf[:n], abuf[n:]
            nframes += 1
            up.sendall(fr * (2 if nframes == 3 else 1))
    if up in r:
        d = up.recv(1 << 20)
        if not d:
            break
        fdown.write(d)
        a.sendall(d)
fup.close()
fdown.close()
