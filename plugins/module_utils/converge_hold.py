# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""A converge's hold on the node check's Slurm actions (standard library only: the node check imports it on the node,
module node_check_hold writes it). site.yml writes it before its roles change a host and module fabric_intent removes
it once the host's new intent is written: {"until": Unix time, "by": who}. While it holds, the check runs and reports
but leaves Slurm alone: the node differs from its intent because it is being changed to a new one, not because it
broke."""

import contextlib
import json
import os
import tempfile

HOLD_PATH = "/run/gpucluster-fabric-check.hold"
HOLD_MAX = 86400  # seconds from the hold's writing past which it holds nothing, whatever its "until" says


def write_hold(path, until, by):
    """Hold the check's Slurm actions until ``until`` (Unix time): ``path`` (HOLD_PATH), root's only, written whole
    (a reader sees the old hold or the new, never half of one)."""
    directory = os.path.dirname(path) or "."
    handle, temporary = tempfile.mkstemp(dir=directory, prefix=".gpucluster-hold-")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump({"until": int(until), "by": str(by)}, out)
            out.write("\n")
        os.chmod(temporary, 0o600)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def release_hold(path):
    """End a converge's hold (``path``: HOLD_PATH); none is no error."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def read_hold(path, now):
    """(until, by) of a converge's hold at ``path`` (HOLD_PATH) that has not expired at ``now``, else None. A hold
    that cannot be read is no hold: the check acts as it would without one. No hold lasts past HOLD_MAX from when
    its file was written: an interrupted converge never holds the node for good."""
    try:
        with open(path, encoding="utf-8") as handle:
            written = os.fstat(handle.fileno()).st_mtime
            hold = json.load(handle)
        until, by = min(float(hold["until"]), written + HOLD_MAX), str(hold.get("by") or "a converge")
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None
    return (until, by) if until > now else None
