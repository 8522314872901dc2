"""RoCEv2 packets captured on the wire carry the ToS role roce_qos set as RDMA-CM's default (run by
tasks/tos_capture.yml with pytest, after converge and again after a reboot in which Ansible does nothing).

The capture is ``tcpdump -nn -v`` of every UDP 4791 packet but QP 1's, both directions, on the client VM during an
``ib_write_bw -R`` run: the client's RDMA writes and the server's acknowledgements, each side's ToS from its own
rxe0's ``default_roce_tos``. Every one must carry it (DSCP = ToS >> 2, ECN = ToS & 3), from both VMs.

Environment: KERNEL_LAB_CAPTURE (the capture file), KERNEL_LAB_TOS (the ToS expected, decimal),
KERNEL_LAB_ADDRESSES (the fabric addresses of the client and the server, comma-separated).
"""

import collections
import os
import re
from pathlib import Path

# tcpdump -v prints the IP header on one line and the addresses on the next:
#   12:00:00.000000 IP (tos 0x6a,ECT(0), ttl 64, id 0, offset 0, flags [DF], proto UDP (17), length 4144)
#       192.168.77.1.49152 > 192.168.77.2.4791: UDP, length 4116
PACKET = re.compile(
    r"IP \(tos (?P<tos>0x[0-9a-f]+)(?:,(?P<ecn>[A-Z()0-9]+))?, .*?proto UDP.*\)\n"
    r"\s+(?P<src>\d+\.\d+\.\d+\.\d+)\.\d+ > (?P<dst>\d+\.\d+\.\d+\.\d+)\.4791: UDP"
)
ECN = {0: "Not-ECT", 1: "ECT(1)", 2: "ECT(0)", 3: "CE"}
# Enough packets from each side that "every one" means something (64 KiB writes are 16 packets each at MTU 4096).
MIN_PER_SIDE = 20


def packets(text):
    return [(m["src"], int(m["tos"], 16), m["ecn"]) for m in PACKET.finditer(text)]


def test_every_roce_packet_carries_the_configured_dscp_and_ecn():
    text = Path(os.environ["KERNEL_LAB_CAPTURE"]).read_text()
    tos = int(os.environ["KERNEL_LAB_TOS"])
    addresses = os.environ["KERNEL_LAB_ADDRESSES"].split(",")
    seen = packets(text)
    by_source = collections.Counter(src for src, _, _ in seen)
    for address in addresses:
        assert by_source[address] >= MIN_PER_SIDE, (
            f"only {by_source[address]} RoCEv2 packets from {address}: {text[-2000:]}"
        )
    found = collections.Counter((src, value) for src, value, _ in seen)
    wrong = {key: count for key, count in found.items() if key[1] != tos}
    assert not wrong, f"packets without ToS {tos} (DSCP {tos >> 2}, {ECN[tos & 3]}): " + ", ".join(
        f"{count} from {src} with ToS {value} (DSCP {value >> 2}, {ECN[value & 3]})"
        for (src, value), count in wrong.items()
    )
    # tcpdump's own reading of the ECN bits agrees.
    assert {ecn for _, _, ecn in seen} == {ECN[tos & 3] if tos & 3 else None}
    print(f"{len(seen)} RoCEv2 packets, all ToS {tos:#x} (DSCP {tos >> 2}, {ECN[tos & 3]}): {dict(by_source)}")


def test_the_parser_reads_tcpdump_v_lines():
    sample = (
        "12:00:00.000001 IP (tos 0x6a,ECT(0), ttl 64, id 0, offset 0, flags [DF], proto UDP (17), length 4144)\n"
        "    192.168.77.1.49152 > 192.168.77.2.4791: UDP, length 4116\n"
        "12:00:00.000002 IP (tos 0x0, ttl 64, id 0, offset 0, flags [DF], proto UDP (17), length 76)\n"
        "    192.168.77.2.49153 > 192.168.77.1.4791: UDP, length 48\n"
    )
    assert packets(sample) == [("192.168.77.1", 0x6A, "ECT(0)"), ("192.168.77.2", 0, None)]
