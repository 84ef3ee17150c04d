# SPDX-License-Identifier: BSD-3-Clause
"""What the loopback proxies of the rendezvous tests share (fake_parent.py,
tap_proxy.py): take one agent on pport, then reach the real leader on
lport (it may still be starting)."""
import socket, time


def accept_and_dial(lport, pport):
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", pport))
    ls.listen(4)
    ls.settimeout(60)
    a, _ = ls.accept()
    for _ in range(300):
        try:
            return a, socket.create_connection(("127.0.0.1", lport))
        except OSError:
            time.sleep(0.1)
    raise SystemExit("the leader never listened on %d" % lport)
