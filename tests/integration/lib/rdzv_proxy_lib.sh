# SPDX-License-Identifier: BSD-3-Clause
# What the rendezvous tests with a loopback proxy share (rdzv_fake_parent*,
# rdzv_tap): two free loopback ports, and whether a log shows a crash.
free_ports2() { python3 -c 'import socket
a=socket.socket(); a.bind(("127.0.0.1",0)); b=socket.socket(); b.bind(("127.0.0.1",0))
print(a.getsockname()[1], b.getsockname()[1])'; }
crashed() { grep -qE 'AddressSanitizer|runtime error:|LeakSanitizer|Segmentation|core dumped' "$@"; }
