# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""The site preflight's report: every problem a host has, from every check, in one message.

gpucluster.fabric.preflight runs three kinds of checks on each host and lets none of them stop the others: the
undeclared-variable check (declared_vars), each role's argument spec, and each role's own input checks (whose first
failure per role is kept). This module turns their results into one list of messages per host.
"""

from ansible_collections.gpucluster.fabric.plugins.module_utils import concerns


def _is_failed(result):
    """A validate_argument_spec result that refused values (run with failed_when: false, so `failed` is false)."""
    return isinstance(result, dict) and bool(result.get("argument_errors") or result.get("failed"))


def spec_messages(host, spec_results):
    """One message per argument-spec error, naming the role; and the roles whose spec failed."""
    messages, failed = [], []
    for result in (spec_results or {}).get("results", []) if isinstance(spec_results, dict) else []:
        if not _is_failed(result):
            continue
        role = result.get("item", "?")
        failed.append(role)
        errors = result.get("argument_errors") or [result.get("msg") or "validation failed"]
        hint = getattr(concerns.get(role), "without", None)
        for error in errors:
            text = f"{host}: gpucluster.fabric.{role}: {error}"
            if hint and "required" in str(error):
                text += f" (set it, {hint})"
            messages.append(text)
    return messages, failed


def declared_messages(declared):
    """The undeclared-variable messages when that check is an error (mode error), else none."""
    if not isinstance(declared, dict) or declared.get("skipped"):
        return []
    if declared.get("warnings") and not declared.get("msg"):
        return []  # mode warn: already shown as warnings
    if declared.get("msg") and not declared.get("messages"):
        return [str(declared["msg"])]  # a bad gpucluster_unknown_vars value
    return [str(m) for m in declared.get("messages") or []] if declared.get("msg") else []


def failed_messages(result):
    """The messages of a failed task result: its own, or each failed loop item's (a looped assert)."""
    if not isinstance(result, dict):
        return [str(result)]
    items = [item for item in result.get("results") or [] if isinstance(item, dict) and item.get("failed")]
    texts = [str(item.get("msg") or "") for item in items] or [str(result.get("msg") or "check failed")]
    # A check that reports several problems writes one per line.
    return [line.strip() for text in texts for line in text.splitlines() if line.strip()]


def check_messages(host, checks):
    """The roles' own check failures (the first failing task per role; every item of a looped one), prefixed with
    the host when they do not name it. Each entry is {role, result} (the failed result) or {role, msg}."""
    messages = []
    for entry in checks or []:
        entry = entry if isinstance(entry, dict) else {"msg": entry}
        role = entry.get("role", "?")
        texts = failed_messages(entry["result"]) if "result" in entry else [str(entry.get("msg", "")).strip()]
        for text in texts:
            if not text.startswith(f"{host}:"):
                text = f"{host}: gpucluster.fabric.{role}: {text}"
            messages.append(text)
    return messages


def report(host, declared, specs, checks):
    """Every message for the host, in the order the checks ran."""
    spec = spec_messages(host, specs)[0]
    return declared_messages(declared) + spec + check_messages(host, checks)


def failure_message(host, messages, roles):
    count = len(messages)
    head = f"{host}: {count} problem{'s' if count != 1 else ''} in the inventory (checked for roles {', '.join(roles)}"
    return head + "); nothing was changed on any host:\n" + "\n".join(f"- {m}" for m in messages)
