#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""A fake tree parent for rdzv_fake_parent.sh: it accepts one agent,
speaks to the real leader for it (the agent's handshake and JOIN go up
unchanged), and sends the agent hostile versions of the frames that
travel down the tree. It holds the job token, so from the two nonces it
sees in clear it derives the connection's session key (wire_chan.c) and
tags every frame it sends down itself, with its own sequence numbers:
what it does not mutate arrives as the real leader sent it.

  fake_parent.py MODE LEADER_PORT LISTEN_PORT [SAVED_CPLACE]

MODE is ACTION-TYPE[-ARG]: TYPE is the frame type byte the action hits
(W tree position, C compact placement, F fate packet; R: the placement
made again after a node was lost, the first C or D frame after the first
C); ACTION is
  pass     relay it (and save the first C frame to SAVED_CPLACE)
  trunc    the header and half the frame, then close
  over     a length of 64 MiB + 1 (over P3D_WIRE_MAX), then close
  zero     a length of 0, then close
  order    send the saved C frame in place of it (out of order)
  flip     flip bit ARG (modulo the body's bits) of its body
  at       flip the low bit of one byte in a position class ARG of the
           whole frame: len0/len3 (the length field's first/last byte),
           type, body0 (first body byte), mid (the body's middle), pre
           (last byte before the tag), tag0/tagmid/tag31 (the tag's first,
           middle, last byte)
  big      append ARG bytes to its body (an oversized placement)
  forge    replace a FATE packet by packet number ARG of FORGED below,
           with a correct tag (this script has the token, so the
           session key): a packet that
           does not parse, or travels the wrong way, must be dropped with
           a message and the job go on
  flood    like forge, ARG copies of packet 0 at once (the messages are
           rate-limited)
"""
import hashlib, hmac, os, select, struct, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from loopback_proxy import accept_and_dial

TAG = 32
KEY = os.environ.get("P3D_RDZV_TOKEN", "").encode() or b"\0"
FORGED = [b"r -1", b"b x", b"Zjunk", b"f 0 0 0 0\nnot from the leader", b"c 1 2", b"t 9 300",
          b"r 1\n\x1b[2J\x07\rtext", b"", b"b 1\x00 2"]

mode, lport, pport = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
saved = sys.argv[4] if len(sys.argv) > 4 else None
parts = mode.split("-")
action, target = parts[0], parts[1]
arg = parts[2] if len(parts) > 2 else "0"
if action != "at":
    arg = int(arg)

a, up = accept_and_dial(lport, pport)
buf, done = b"", False
seen_c = False
abuf = b""          # the agent's bytes until its challenge is whole
nonce_i = kind = None
sk = None           # the session key, once the leader's answer went by
seq = 0             # the next leader -> agent frame's number


def frame(t, body):
    return struct.pack(">I", len(body) + 1) + bytes([t]) + body


def sealed(t, payload):
    """a frame the real leader could have sent on this connection next:
    payload, then its tag (from the acceptor, this frame's number)"""
    global seq
    tag = hmac.new(sk, b"a" + struct.pack(">Q", seq) + bytes([t]) + payload, hashlib.sha256).digest()
    seq += 1
    return frame(t, payload + tag)


def wire_proto():
    """P3D_WIRE_PROTO as launcher/wire/wire.h defines it: the session key
    binds the protocol number, so a bump must not leave this proxy behind"""
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "launcher", "wire", "wire.h")
    with open(src, encoding="utf-8") as f:
        for line in f:
            w = line.split()
            if len(w) >= 3 and w[0] == "#define" and w[1] == "P3D_WIRE_PROTO":
                return int(w[2])
    raise SystemExit("fake_parent: no P3D_WIRE_PROTO in " + src)


PROTO = wire_proto()


def session(nonce_a):
    t = nonce_i + nonce_a + struct.pack(">II", kind, PROTO)
    return hmac.new(KEY, b"p3d-session" + t, hashlib.sha256).digest()


def position(fr, cls):
    n = len(fr)
    return {"len0": 0, "len3": 3, "type": 4, "body0": 5, "mid": 5 + (n - 5 - TAG) // 2, "pre": n - TAG - 1,
            "tag0": n - TAG, "tagmid": n - TAG // 2, "tag31": n - 1}[cls]


while not done:
    r, _, _ = select.select([a, up], [], [], 60)
    if not r:
        break
    if a in r:
        d = a.recv(65536)
        if not d:
            break
        if nonce_i is None:
            abuf += d
            if len(abuf) >= 5 + 40 and abuf[4:5] == b"A":
                kind = struct.unpack(">I", abuf[9:13])[0]
                nonce_i = abuf[13:45]
        up.sendall(d)
    if up in r:
        d = up.recv(1 << 20)
        if not d:
            break
        buf += d
        while len(buf) >= 4 and not done:
            n = struct.unpack(">I", buf[:4])[0]
            if len(buf) < 4 + n:
                break
            fr, buf = buf[: 4 + n], buf[4 + n :]
            t, body = chr(fr[4]), fr[5:]
            if sk is None:
                # the handshake's answer (or a refusal) passes as it is
                if t == "B" and nonce_i is not None:
                    sk = session(body[:32])
                a.sendall(fr)
                continue
            # the real tag off, ours on: the same bytes when unchanged
            payload = body[:-TAG]
            fr = sealed(fr[4], payload)
            body = fr[5:]
            hit = t == target or (target == "R" and seen_c and t in "CD")
            seen_c = seen_c or t == "C"
            if not hit or action == "pass":
                if t == "C" and saved and action == "pass":
                    open(saved, "wb").write(fr)
                a.sendall(fr)
                continue
            if action == "trunc":
                a.sendall(fr[: 4 + n // 2])
                done = True
            elif action == "over":
                a.sendall(struct.pack(">I", (64 << 20) + 1) + fr[4:])
                done = True
            elif action == "zero":
                a.sendall(struct.pack(">I", 0))
                done = True
            elif action == "order":
                a.sendall(open(saved, "rb").read())
            elif action == "flip":
                b = bytearray(body)
                bit = arg % (8 * len(b))
                b[bit // 8] ^= 1 << (bit % 8)
                a.sendall(frame(fr[4], bytes(b)))
            elif action == "at":
                b = bytearray(fr)
                b[position(fr, arg)] ^= 1
                a.sendall(bytes(b))
                if arg.startswith("len"):
                    done = True  # the stream is out of step from here on
            elif action == "forge":
                seq -= 1  # the forged packet takes the real one's number
                a.sendall(sealed(fr[4], FORGED[arg]))
                a.sendall(sealed(fr[4], payload))  # then the real one: the job goes on
            elif action == "flood":
                seq -= 1
                a.sendall(b"".join(sealed(fr[4], FORGED[0]) for _ in range(arg)))
                a.sendall(sealed(fr[4], payload))
            elif action == "big":
                a.sendall(frame(fr[4], body + b"\x00" * arg))
            target = None  # once: later frames of that type pass
# the agent's own verdict comes on its stderr; give it time to write it
time.sleep(0.5)
