# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""The fabric model: the one definition of P_Keys, IB MTUs, integer inventory values, versions and interfaces.

Pure functions only (no Ansible imports), importable on Python 3.8 targets. Every role, filter and module that reads
a P_Key, an MTU or a ``fabric_interfaces`` entry goes through these functions, so that one inventory value means the
same thing everywhere. Sources:

* P_Keys (IBTA spec vol. 1, Partitioning): 16 bits; the top bit is the membership (1 = full, 0 = limited), the low
  15 bits name the partition. OpenSM uses only the low 15 bits of a partitions.conf P_Key (OpenSM
  doc/partition-config.txt); 0x7fff is the Default partition. The kernel names an IPoIB child
  ``<parent>.<P_Key, 4 hex digits>`` (Documentation/infiniband/ipoib.rst: ``echo 0x8001 > .../ib0/create_child``)
  and sets the full-membership bit on every child's P_Key (ipoib_main.c ``create_child``, ipoib_netlink.c
  ``ipoib_new_child_link``), so a child's name always carries the full value.
* IB MTU codes (IBTA spec vol. 1, table "MTU"; OpenSM partitions.conf ``mtu=``): 1=256 ... 5=4096 bytes.
* IPoIB datagram mode (IB UD, RFC 4391) carries the IB MTU minus the 4-byte IPoIB header, and never more than the
  partition's broadcast-group MTU, which OpenSM takes from the partition's ``mtu=`` (default 4 = 2048 bytes).
  Connected mode (IB RC, RFC 4755) goes up to 65520.
* RoCE (kernel ``iboe_get_mtu``): the RDMA active MTU is the largest IB MTU that fits in the netdev MTU minus 96 bytes
  of headers, so a 4096 RDMA MTU needs a netdev MTU of at least 4192.
"""

import contextlib
import re

# --- integers -------------------------------------------------------------------------------------------------------

_DIGITS_RE = re.compile(r"^[0-9]+$")


def parse_int(value):
    """An inventory integer: an int, or a string of decimal digits ("4096", as AWX surveys and ``-e`` pass them).

    Booleans, floats, signs, hex and anything else raise ValueError: YAML ``yes`` or ``4096.5`` is a mistake, not an
    MTU.
    """
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is a boolean, not a number")
    if isinstance(value, int):
        return value
    if isinstance(value, str) and _DIGITS_RE.match(value.strip()):
        return int(value.strip())
    raise ValueError(f"{value!r} is not a whole number")


def is_int(value):
    """Whether ``value`` is an int and not a boolean (YAML ``true`` is an int to Python)."""
    return isinstance(value, int) and not isinstance(value, bool)


# --- booleans -------------------------------------------------------------------------------------------------------

# The words ansible-core's ``bool`` filter maps without a deprecation warning (ansible/plugins/filter/core.py,
# ``_valid_bool_true``/``_valid_bool_false``), so a switch means the same in YAML and in Python.
_BOOL_TRUE = frozenset(("true", "yes", "on", "1"))
_BOOL_FALSE = frozenset(("false", "no", "off", "0"))


def parse_bool(value):
    """An inventory boolean: True/False, 0/1, or "true"/"false"/"yes"/"no"/"on"/"off"/"1"/"0" in any case.

    ``-e flag=false`` and AWX surveys pass strings, and ``bool("false")`` is True. Anything else (None, "", "maybe",
    2) raises ValueError instead of guessing.
    """
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return value == 1
    if isinstance(value, str):
        word = value.lower()
        if word in _BOOL_TRUE:
            return True
        if word in _BOOL_FALSE:
            return False
    raise ValueError(f"{value!r} is not a boolean; write true or false")


# --- versions -------------------------------------------------------------------------------------------------------

_VERSION_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)*)")


def version_tuple(text):
    """Leading dotted numbers of a version as a tuple of ints: '2.21.5' -> (2, 21, 5), '6.1.0-18-amd64' -> (6, 1, 0).

    ValueError when ``text`` does not start with a number (None, '', 'unknown'): callers decide what an unknown
    version means.
    """
    match = _VERSION_RE.match("" if text is None else str(text))
    if not match:
        raise ValueError(f"{text!r} does not start with a version number")
    return tuple(int(part) for part in match.group(1).split("."))


# --- P_Keys ---------------------------------------------------------------------------------------------------------

DEFAULT_PKEY = 0x7FFF
PKEY_MIN = 0x0001
PKEY_MAX = 0x7FFE
PKEY_FULL_MEMBER = 0x8000
_PKEY_RE = re.compile(r"^0x[0-9a-f]{1,4}$")
_IPOIB_CHILD_RE = re.compile(r"^.+\.([0-9a-fA-F]{4})$")


def parse_pkey(value):
    """The full 16-bit P_Key (membership bit kept): an int, or hex digits with ``0x`` ('0x8001' -> 0x8001).

    A string without ``0x`` is refused: '8001' could be read as decimal 8001 (0x1f41) or as hex, and a P_Key is
    always written in hex. Use ``pkey_base`` for the partition (low 15 bits).
    """
    if isinstance(value, bool):
        raise ValueError("a boolean is not a P_Key")
    if isinstance(value, int):
        number = value
    elif isinstance(value, str):
        text = value.strip().lower()
        if not _PKEY_RE.match(text):
            if re.match(r"^[0-9a-f]{1,4}$", text):
                raise ValueError(f"{value!r} is ambiguous (decimal or hex?); write it as hex with 0x, e.g. 0x{text}")
            raise ValueError("write it as hex with 0x, e.g. 0x8101")
        number = int(text, 16)
    else:
        raise ValueError("not a number; write it as hex with 0x, e.g. 0x8101")
    if not 0 <= number <= 0xFFFF:
        raise ValueError("P_Keys are 16 bits (0x0000-0xffff)")
    return number


def pkey_base(value):
    """The partition a P_Key names: its low 15 bits ('0x8001' and '0x0001' -> 0x0001)."""
    return parse_pkey(value) & DEFAULT_PKEY


def pkey_is_full(value):
    """Whether a P_Key has the full-membership bit set ('0x8001' -> True, '0x0001' -> False)."""
    return bool(parse_pkey(value) & PKEY_FULL_MEMBER)


def interface_name_pkey(name):
    """The full P_Key an IPoIB child's name carries ('ib0.8101' -> 0x8101), None for a name without one ('ib0')."""
    match = _IPOIB_CHILD_RE.match(name) if isinstance(name, str) else None
    return int(match.group(1), 16) if match else None


# --- IB MTUs --------------------------------------------------------------------------------------------------------

# IBTA MTU code -> bytes: the one table, read in both directions below.
_IB_MTU_TABLE = ((1, 256), (2, 512), (3, 1024), (4, 2048), (5, 4096))
IB_MTUS = tuple(size for _code, size in _IB_MTU_TABLE)
# OpenSM's broadcast-group MTU when a partition gives none (OSM_DEFAULT_MGRP_MTU = 4 = 2048 bytes).
OPENSM_DEFAULT_PARTITION_MTU = 2048
IPOIB_HEADER_BYTES = 4
IPOIB_CONNECTED_MAX_MTU = 65520
# RoCE: GRH 40 + UDP 8 + BTH 12 + XRC 4 + AtomicETH 28 + ICRC 4 bytes of headers (kernel iboe_get_mtu).
ROCE_HEADER_BYTES = 96


def _ib_mtu_lookup(value, by_bytes):
    """The other column of ``_IB_MTU_TABLE`` for ``value`` (int or digit string), or None when it is not there."""
    try:
        number = parse_int(value)
    except ValueError:
        return None
    for code, size in _IB_MTU_TABLE:
        if number == (size if by_bytes else code):
            return code if by_bytes else size
    return None


def ib_mtu_code(mtu_bytes):
    """IB MTU in bytes (256 ... 4096, int or digit string) -> IBTA code (1-5); ValueError for anything else."""
    code = _ib_mtu_lookup(mtu_bytes, by_bytes=True)
    if code is None:
        raise ValueError("IB MTU must be one of {} bytes".format(", ".join(str(size) for size in IB_MTUS)))
    return code


def ib_mtu_bytes(code):
    """IBTA MTU code (1-5, as partitions.conf ``mtu=`` and ``ibv_devinfo`` print it) -> bytes; ValueError otherwise."""
    size = _ib_mtu_lookup(code, by_bytes=False)
    if size is None:
        raise ValueError(f"IB MTU code must be 1-5, got {code!r}")
    return size


def partition_mtu_bytes(value):
    """Broadcast-group IB MTU of a partition's ``mtu`` (bytes, int or digit string); None -> OpenSM's 2048."""
    if value is None:
        return OPENSM_DEFAULT_PARTITION_MTU
    ib_mtu_code(value)
    return parse_int(value)


def partition_ipoib(partition):
    """Whether an ``opensm_partitions`` entry (or ``opensm_default_partition``) carries IPoIB: off unless ``ipoib``.

    OpenSM creates a partition's IPoIB broadcast group only when its partitions.conf line has the ``ipoib`` flag
    (OpenSM doc/partition-config.txt: "ipoib - indicates that this partition may be used for IPoIB"), and role opensm
    writes the flag only for ``ipoib: true``; without the group an IPoIB interface on the partition cannot join it.
    Raises ValueError when ``ipoib`` is not a boolean.
    """
    return parse_bool(partition.get("ipoib", False))


def ipoib_max_mtu(mode, ib_mtu=4096):
    """Largest IPoIB netdev MTU for ``mode`` on a fabric (or partition) whose IB MTU is ``ib_mtu`` bytes."""
    if mode == "connected":
        return IPOIB_CONNECTED_MAX_MTU
    if mode == "datagram":
        ib_mtu_code(ib_mtu)
        return parse_int(ib_mtu) - IPOIB_HEADER_BYTES
    raise ValueError(f"IPoIB mode must be datagram or connected, got {mode!r}")


def ipoib_partition_limit(mode, partition_mtu):
    """The most a partition with ``mtu`` (bytes or None) lets an IPoIB interface in ``mode`` use; None = no limit.

    Datagram IPoIB sends every packet through the partition's broadcast group, so its MTU is capped at the group's IB
    MTU minus 4. Connected mode (RC) is not capped by the group for unicast.
    """
    if mode != "datagram":
        return None
    return ipoib_max_mtu("datagram", partition_mtu_bytes(partition_mtu))


def roce_active_mtu(netdev_mtu, max_mtu=4096):
    """RDMA active MTU of a RoCE port whose netdev has ``netdev_mtu`` (1500 -> 1024, 4200 -> 4096); None if none fits.

    ``max_mtu``: the port's max_mtu (a device may support less than 4096).
    """
    if netdev_mtu in (None, ""):
        return None
    room = parse_int(netdev_mtu) - ROCE_HEADER_BYTES
    fitting = [size for size in IB_MTUS if size <= room and size <= max_mtu]
    return fitting[-1] if fitting else None


def roce_min_netdev_mtu(rdma_mtu):
    """Smallest netdev MTU that gives a RoCE RDMA MTU of ``rdma_mtu`` (4096 -> 4192)."""
    ib_mtu_code(rdma_mtu)
    return parse_int(rdma_mtu) + ROCE_HEADER_BYTES


# --- interfaces -----------------------------------------------------------------------------------------------------

KINDS = ("ipoib", "roce")
IPOIB_MODES = ("datagram", "connected")
DEFAULT_MTU = {("ipoib", "datagram"): 4092, ("ipoib", "connected"): IPOIB_CONNECTED_MAX_MTU, ("roce", None): 9000}
INTERFACE_KEYS = frozenset(("name", "kind", "mode", "mtu", "address", "softroce", "pkey"))


def interface_pkey(iface):
    """The full P_Key of a ``fabric_interfaces`` entry: its ``pkey`` key, else its name's suffix, else None.

    Raises ValueError when ``pkey`` is not a P_Key (see ``parse_pkey``).
    """
    if iface.get("pkey") is not None:
        return parse_pkey(iface["pkey"])
    return interface_name_pkey(iface.get("name"))


def interface_partition(iface):
    """The partition (low 15 bits) an IPoIB entry runs on: ``ib0.8101`` or ``pkey: 0x8101`` -> 0x0101, ``ib0`` ->
    the Default partition 0x7fff."""
    pkey = interface_pkey(iface)
    return DEFAULT_PKEY if pkey is None else pkey & DEFAULT_PKEY


def normalise_interface(iface):
    """A copy of one ``fabric_interfaces`` entry with the defaults filled in.

    mode (datagram for IPoIB, None for RoCE), mtu (int; the kind's default when unset; an unparsable value is left
    as written for the validator to report), address, softroce, pkey (full P_Key as int, IPoIB only: from ``pkey`` or
    the name's suffix, None for neither; left as written when it is not a P_Key), and rdma_mtu for RoCE.
    """
    result = dict(iface)
    kind = result.get("kind")
    if kind == "ipoib":
        result["mode"] = result.get("mode") or "datagram"
    else:
        result.setdefault("mode", None)
    if result.get("mtu") in (None, ""):
        result["mtu"] = DEFAULT_MTU.get((kind, result["mode"]))
    else:
        with contextlib.suppress(ValueError):
            result["mtu"] = parse_int(result["mtu"])
    result.setdefault("address", None)
    result.setdefault("softroce", None)
    if kind == "ipoib":
        with contextlib.suppress(ValueError):
            result["pkey"] = interface_pkey(result)
    else:
        result.setdefault("pkey", None)
    if kind == "roce" and is_int(result["mtu"]):
        result["rdma_mtu"] = roce_active_mtu(result["mtu"])
    return result


def interface_modules(interfaces):
    """Kernel modules the fabric interfaces need beyond ib_core: ib_ipoib for IPoIB, rdma_rxe for Soft-RoCE."""
    interfaces = [i for i in interfaces or [] if isinstance(i, dict)]
    modules = []
    if any(i.get("kind") == "ipoib" for i in interfaces):
        modules.append("ib_ipoib")
    if any(i.get("kind") == "roce" and i.get("softroce") for i in interfaces):
        modules.append("rdma_rxe")
    return modules
