# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""What every applier module shares: change a file or a kernel module only where the live state differs, and say what
changed and why (``changes``), with a diff of each file; in check mode the same report and no change.

``module`` is the AnsibleModule (its check_mode, atomic_move and run_command are used). ``root`` stands for ``/``:
tests point it at a tree, so that files are read and written below it.
"""

import os
import shutil
import tempfile

FILE_MODE = 0o644
# What the diff shows of a file that holds secrets (a change to it is still reported, with why).
SECRET_DIFF = "({} content not shown: the file holds keys)\n"
# The options every applier module has (documented in plugins/doc_fragments/applier.py).
ARGUMENT_SPEC = {
    "state": {"type": "str", "default": "present", "choices": ["present", "checked"]},
    "root": {"type": "path", "default": "/"},
    "host": {"type": "str", "default": ""},
    "header": {"type": "str", "default": ""},
}


def steps_to_run(steps, run_tags, skip_tags, prefix):
    """The steps of ``steps`` this run applies: those whose tag (``prefix`` + step) the run names, or all when it names
    none of the role's tags (``--tags <prefix>preflight`` alone: none), less those it skips."""
    named = [step for step in (*steps, "preflight") if prefix + step in (run_tags or [])]
    chosen = [step for step in steps if step in named] if named else list(steps)
    return [step for step in chosen if prefix + step not in (skip_tags or [])]


def _why(before, content, mode):
    if before is None:
        return "it is missing"
    if before != content:
        return "its content differs"
    return f"mode {mode:04o}"


class Applier:
    """Changes one file or module at a time, only where the live state differs, and says what and why."""

    def __init__(self, module, root=None):
        self.module = module
        self.root = module.params.get("root", "/") if root is None else root
        self.changes, self.diff = [], []

    def refuse(self, errors):
        """Fail, changing nothing, with every problem of the input on a line of its own that names the host."""
        if errors:
            host = self.module.params.get("host")
            prefix = f"{host}: " if host else ""
            self.module.fail_json(msg="\n".join(prefix + error for error in errors), changed=False)

    def path(self, path):
        return os.path.join(self.root, path.lstrip("/"))

    def _read(self, path):
        try:
            with open(self.path(path), encoding="utf-8") as handle:
                return handle.read()
        except FileNotFoundError:
            return None

    def file(self, path, content, mode=FILE_MODE, secret=False):
        """Make ``path`` hold ``content`` (``mode``, root's), or be absent when ``content`` is None. A ``secret`` file's
        content is never put in the diff."""
        real = self.path(path)
        before = self._read(path)
        if content is None:
            if before is None:
                return
            self._record(path, "it is not wanted (removed)", before, "", secret)
            if not self.module.check_mode:
                os.unlink(real)
            return
        mode_wrong = before is not None and (os.stat(real).st_mode & 0o7777) != mode
        if before == content and not mode_wrong:
            return
        self._record(path, _why(before, content, mode), before or "", content, secret)
        if self.module.check_mode:
            return
        directory = os.path.dirname(real)
        os.makedirs(directory, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=directory, prefix=".gpucluster-")
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(content)
        os.chmod(temporary, mode)
        self.module.atomic_move(temporary, real)
        # atomic_move gives a new file the umask's mode (0644) and an existing one its old mode: set ours after it.
        os.chmod(real, mode)

    def report(self, result, **extra):
        """``result`` with what changed (``changed``, ``changes``) and, in diff mode, the diff of each file."""
        result.update(extra, changed=bool(self.changes), changes=self.changes)
        if self.module._diff:
            result["diff"] = self.diff
        return result

    def _record(self, path, why, before, after, secret=False):
        self.changes.append({"what": path, "why": why})
        if secret:
            before, after = (SECRET_DIFF.format(age) if text else "" for age, text in (("old", before), ("new", after)))
        self.diff.append({"before_header": path, "after_header": path, "before": before, "after": after})

    def directory(self, path, mode=0o755):
        """Make directory ``path`` exist (``mode``, root's) where it is missing; an existing one is left as it is."""
        real = self.path(path)
        if os.path.isdir(real):
            return
        self.changes.append({"what": path, "why": "the directory is missing"})
        if not self.module.check_mode:
            os.makedirs(real, exist_ok=True)
            os.chmod(real, mode)

    def remove_directory(self, path):
        """Make directory ``path`` and all it holds be gone (``root``'s), where it is there."""
        real = self.path(path)
        if not os.path.isdir(real):
            return
        self.changes.append({"what": path, "why": "it is not wanted (removed)"})
        if not self.module.check_mode:
            shutil.rmtree(real)

    def loaded(self, name):
        return os.path.exists(self.path("/sys/module/" + name))

    def load(self, modprobe, name, why):
        """modprobe ``name`` unless it is loaded; returns modprobe's stderr on failure, else None."""
        if self.loaded(name):
            return None
        self.changes.append({"what": "module " + name, "why": why})
        if self.module.check_mode:
            return None
        rc, _out, err = self.module.run_command([modprobe, name])
        return None if rc == 0 else (err.strip() or f"modprobe {name} exited {rc}")
