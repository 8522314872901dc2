# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""Read OpenPGP public keyrings (binary or ASCII-armored) and compute key fingerprints (RFC 4880 / RFC 9580).

Pure Python so a target needs no gpg binary: apt's keyrings (``/usr/share/keyrings/*.gpg``) are plain concatenated
public-key packets.
"""

import base64
import hashlib
import re

TAG_PUBLIC_KEY = 6
TAG_PUBLIC_SUBKEY = 14

_ARMOR_RE = re.compile(
    r"-----BEGIN PGP PUBLIC KEY BLOCK-----\r?\n(?P<body>.*?)-----END PGP PUBLIC KEY BLOCK-----",
    re.DOTALL,
)


class OpenPGPError(ValueError):
    pass


def dearmor(data):
    """Return the binary packets of an ASCII-armored key block, or ``data`` unchanged when it is binary."""
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        return data
    match = _ARMOR_RE.search(text)
    if not match:
        return data
    lines = match.group("body").splitlines()
    # Armor headers ("Version: ...") end at the first empty line; the checksum line starts with "=".
    if "" in lines:
        lines = lines[lines.index("") + 1 :]
    payload = "".join(line.strip() for line in lines if line.strip() and not line.startswith("="))
    try:
        return base64.b64decode(payload, validate=True)
    except (ValueError, TypeError) as exc:
        raise OpenPGPError(f"invalid ASCII armor: {exc}") from exc


def iter_packets(data):
    """Yield (tag, body) for each OpenPGP packet in binary ``data``."""
    pos = 0
    size = len(data)
    while pos < size:
        header = data[pos]
        if not header & 0x80:
            raise OpenPGPError(f"not an OpenPGP packet at offset {pos}")
        if header & 0x40:  # new format
            tag = header & 0x3F
            pos += 1
            if pos >= size:
                raise OpenPGPError("truncated packet header")
            first = data[pos]
            if first < 192:
                length, pos = first, pos + 1
            elif first < 224:
                if pos + 1 >= size:
                    raise OpenPGPError("truncated packet length")
                length, pos = ((first - 192) << 8) + data[pos + 1] + 192, pos + 2
            elif first == 255:
                if pos + 4 >= size:
                    raise OpenPGPError("truncated packet length")
                length, pos = int.from_bytes(data[pos + 1 : pos + 5], "big"), pos + 5
            else:
                raise OpenPGPError("partial body lengths are not valid in a keyring")
        else:  # old format
            tag = (header >> 2) & 0x0F
            length_type = header & 0x03
            pos += 1
            if length_type == 3:
                raise OpenPGPError("indeterminate packet length is not valid in a keyring")
            width = (1, 2, 4)[length_type]
            if pos + width > size:
                raise OpenPGPError("truncated packet length")
            length, pos = int.from_bytes(data[pos : pos + width], "big"), pos + width
        if pos + length > size:
            raise OpenPGPError(f"truncated packet body (tag {tag})")
        yield tag, data[pos : pos + length]
        pos += length


def fingerprint(body):
    """Fingerprint (upper-case hex) of a public-key or public-subkey packet body."""
    if not body:
        raise OpenPGPError("empty key packet")
    version = body[0]
    if version == 4:
        return hashlib.sha1(b"\x99" + len(body).to_bytes(2, "big") + body).hexdigest().upper()
    if version == 5:
        return hashlib.sha256(b"\x9a" + len(body).to_bytes(4, "big") + body).hexdigest().upper()
    if version == 6:
        return hashlib.sha256(b"\x9b" + len(body).to_bytes(4, "big") + body).hexdigest().upper()
    raise OpenPGPError(f"unsupported key packet version {version}")


def keyring_info(data):
    """Return {"keys": [{"fingerprint", "version", "subkeys": [...]}]} for the keys in a keyring."""
    keys = []
    for tag, body in iter_packets(dearmor(data)):
        if tag == TAG_PUBLIC_KEY:
            keys.append({"fingerprint": fingerprint(body), "version": body[0], "subkeys": []})
        elif tag == TAG_PUBLIC_SUBKEY:
            if not keys:
                raise OpenPGPError("subkey before any primary key")
            keys[-1]["subkeys"].append(fingerprint(body))
    return {"keys": keys}


def normalize_fingerprint(value):
    """Upper-case hex without spaces; ``None`` when ``value`` is not a 40 (v4) or 64 (v5/v6) hex fingerprint."""
    text = re.sub(r"\s+", "", str(value)).upper()
    if text.startswith("0X"):
        text = text[2:]
    if re.fullmatch(r"[0-9A-F]{40}|[0-9A-F]{64}", text):
        return text
    return None
