# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)

"""Action plugin gpucluster.fabric.fabric_validate_report (documented in plugins/modules/fabric_validate_report.py).

Judges every host and writes the run's report on the controller: report.json (json), junit.xml (ElementTree,
plugins/plugin_utils/report_files.py), summary.md (rendered from its template by Ansible's templar, as the template
module would), heatmap.png (every host x every check) and plot.png (the bandwidth measurements with their
thresholds, only when something was measured). Without matplotlib the figures are left out and the report says why.
"""

import json
import os
import tempfile

from ansible import constants as C
from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible.plugins.filter.core import to_nice_json
from ansible.template import trust_as_template
from ansible_collections.gpucluster.fabric.plugins.module_utils.fabric_checks import (
    evaluate,
    failure_lines,
    host_record,
    merge_thresholds,
    nccl_side_by_side,
    plot_series,
)
from ansible_collections.gpucluster.fabric.plugins.module_utils.report_plot import (
    draw_heatmap,
    draw_plot,
    figures_note,
    have_matplotlib,
    heatmap_grid,
    plot_panels,
)
from ansible_collections.gpucluster.fabric.plugins.plugin_utils.report_files import junit_xml

TEMPLATES = (("summary.md.j2", "summary.md"),)
# What the template module renders with (its defaults): blocks trimmed, lines not stripped, Unix newlines.
TEMPLATE_OVERRIDES = {"trim_blocks": True, "lstrip_blocks": False, "newline_sequence": "\n"}


def host_records(names, hostvars):
    """{host: record} for the hosts ``names``: the record the measured tiers kept (``__fabric_validate_host``), else
    the one role fabric_validate's collection registered, with its sminfo answers."""
    records = {}
    for name in names:
        variables = hostvars[name]
        if "__fabric_validate_node_check" in variables:  # the fleet check (tasks/check.yml)
            records[name] = node_check_record(variables["__fabric_validate_node_check"])
            continue
        kept = variables.get("__fabric_validate_host")
        if kept is not None:
            records[name] = kept
            continue
        collected = variables.get("__fabric_validate_collected") or {}
        if "record" not in collected:
            raise AnsibleActionFail(f"fabric_validate_report: {name} has no record of what was read (collect.yml)")
        records[name] = host_record(collected, lambda variables=variables: _sminfo_results(variables))
    return records


def node_check_record(result):
    """A host's record from its node check's registered command result: {node_check: {report, error}, versions}; the
    versions it read are compared across the fleet like the health tier's."""
    try:
        report = json.loads(result.get("stdout") or "")
    except ValueError:
        report = None
    error = None if isinstance(report, dict) else " ".join(str(result.get("msg") or result.get("stderr") or "").split())
    versions = (report or {}).get("versions") if isinstance(report, dict) else None
    return {"node_check": {"report": report, "error": error or f"rc {result.get('rc')}"}, "versions": versions}


def subnet_manager_records(results):
    """{subnet manager: record} from the loop that ran each one's node check (tasks/report.yml): the same record as a
    node of the fleet check; a skipped item (not asked) has none, an unreachable one says why it was not checked."""
    return {
        str(result["item"]): node_check_record(result)
        for result in results or []
        if isinstance(result, dict) and "item" in result and not result.get("skipped")
    }


def _sminfo_results(variables):
    """The results of a host's sminfo loop (read only when it asked a port: its loop had items)."""
    return variables["__fabric_validate_sminfo"]["results"] if "__fabric_validate_sminfo" in variables else []


def host_failures(checks, hosts, shared=()):
    """{host: [failure line]} for each host: its own failed checks and the fleet's, and those of the ``shared`` hosts
    (the subnet managers the play asked from outside: their failures are the fabric's)."""
    return {host: failure_lines([c for c in checks if c["host"] in (host, "fleet", *shared)]) for host in hosts}


def build_report(args):
    """The report document (what report.json holds) and the per-host failure lines, from the action's arguments."""
    hosts = args.get("hosts") or {}
    thresholds = merge_thresholds(args.get("thresholds"), args.get("threshold_overrides"))
    result = evaluate(
        hosts,
        {
            "tiers": args.get("tiers") or [],
            "thresholds": thresholds,
            "references": args.get("busbw_references") or [],
            "rdma_bw_references": args.get("rdma_bw_references") or [],
            "expected": args.get("expected") or {},
            "rdma_device": args.get("rdma_device") or "",
            "unreached": args.get("unreached") or [],
        },
    )
    report = {
        "run_id": args["run_id"],
        "tiers": args.get("tiers") or [],
        "thresholds": thresholds,
        "busbw_references": args.get("busbw_references") or [],
        "rdma_bw_references": args.get("rdma_bw_references") or [],
        "summary": result["summary"],
        "checks": result["checks"],
        "figures": figures_plan(plot_series(hosts, result["checks"]), have_matplotlib()),
        "nccl_side_by_side": nccl_side_by_side(hosts),
        "hosts": hosts,
    }
    shared = [host for host in hosts if host not in args.get("play_hosts", hosts)]
    return report, host_failures(result["checks"], hosts, shared)


def figures_plan(series, matplotlib_present):
    """{files, note}: the figures this report has (heatmap.png always, plot.png when something was measured, from
    ``series``, plot_series' data), or none and the reason when matplotlib is missing."""
    if not matplotlib_present:
        return {"files": [], "note": figures_note()}
    files = ["heatmap.png"]
    note = None
    if plot_panels(series):
        files.append("plot.png")
    else:
        note = "no bandwidth plot: nothing was measured (no RDMA or NCCL tier ran, or every measurement was skipped)"
    if series.get("left_out"):  # one-rank runs: shown as text, not drawn
        note = "; ".join([*([note] if note else []), *series["left_out"]])
    return {"files": files, "note": note}


def _write(path, text):
    """Write atomically with mode 0644; False when the file already holds exactly this text."""
    data = text.encode("utf-8")
    try:
        with open(path, "rb") as handle:
            if handle.read() == data:
                return False
    except OSError:
        pass
    handle, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".fabric_validate-")
    with os.fdopen(handle, "wb") as out:
        out.write(data)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)
    return True


def summary_line(run_id, summary, run_dir, check_mode):
    """The one line the role shows. Check mode can only read the hosts as they are now, before the changes the same
    run would make: its failures are reported, not enforced, and nothing is written."""
    counts = f"{summary['passed']} passed, {summary['failed']} failed, {summary['skipped']} skipped"
    line = f"fabric_validate {run_id}: {counts}"
    if not check_mode:
        return f"{line}; report in {run_dir}"
    return (
        f"{line}; check mode: the hosts were read as they are now, before the changes this run would make, "
        f"{summary['failed']} failed check(s) are reported, not enforced, and no report was written"
    )


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _VALID_ARGS = frozenset(
        {
            "run_id",
            "report_dir",
            "templates",
            "tiers",
            "thresholds",
            "threshold_overrides",
            "busbw_references",
            "rdma_bw_references",
            "expected",
            "rdma_device",
            "hosts",
            "unreached",
            "subnet_managers",
        }
    )

    @staticmethod
    def _managed(task_vars, name):
        managed = task_vars.get("ansible_managed")
        if managed is None:
            managed = C.config.get_config_value("DEFAULT_MANAGED_STR").format(host="", uid="", file=name)
        return managed

    def _render(self, template_dir, name, report, task_vars):
        source = os.path.join(template_dir, name)
        managed = self._managed(task_vars, name)
        templar = self._templar.copy_with_new_env(
            searchpath=[template_dir], available_variables={"report": report, "ansible_managed": managed}
        )
        text = trust_as_template(self._loader.get_text_file_contents(source))
        return templar.template(text, escape_backslashes=False, overrides=TEMPLATE_OVERRIDES) or ""

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        args = self._task.args
        for required in ("run_id", "report_dir", "templates"):
            if not args.get(required):
                raise AnsibleActionFail(f"fabric_validate_report: {required} is required")
        if isinstance(args.get("hosts"), (list, tuple)):
            records = host_records(args["hosts"], task_vars.get("hostvars") or {})
            # The subnet managers' own checks, asked from outside this play (tasks/report.yml): judged with the rest.
            records.update(subnet_manager_records(args.get("subnet_managers")))
            args = dict(args, hosts=records, play_hosts=list(args["hosts"]))
        report, failures = build_report(args)
        # Relative to where ansible-playbook runs, never inside a playbook's or an installed collection's directory.
        run_dir = os.path.join(os.path.abspath(os.path.expanduser(str(args["report_dir"]))), str(report["run_id"]))
        contents = {
            "report.json": to_nice_json(report, indent=2) + "\n",
            "junit.xml": junit_xml(report, self._managed(task_vars, "junit.xml")),
        }
        for template, name in TEMPLATES:
            contents[name] = self._render(str(args["templates"]), template, report, task_vars)
        figures = report["figures"]
        files = [os.path.join(run_dir, name) for name in (*contents, *figures["files"])]
        # The report is this run's output, not state on the hosts: writing it is never a change (a re-run measures
        # again and writes new numbers, yet an idempotence or drift check must see 0 changed). Check mode writes
        # nothing, as file, copy and template would not.
        msg = summary_line(report["run_id"], report["summary"], run_dir, self._task.check_mode)
        if not figures["files"]:  # matplotlib missing: the line says so, the run goes on
            msg = f"{msg}; {figures['note']}"
        result.update(
            changed=False,
            msg=msg,
            run_id=report["run_id"],
            run_dir=run_dir,
            files=files,
            summary=report["summary"],
            checks=report["checks"],
            failures=failures,
        )
        # Kept by AWX/AAP as the job's artifacts (set_stats' mechanism): the outcome outlives the execution environment.
        outcome = {name: result[name] for name in ("run_id", "run_dir", "files", "summary", "failures")}
        result["ansible_stats"] = {"data": {"fabric_validate": outcome}, "per_host": False, "aggregate": False}
        if self._task.check_mode:
            return result
        os.makedirs(run_dir, exist_ok=True)
        os.chmod(run_dir, 0o755)
        for name, text in contents.items():
            _write(os.path.join(run_dir, name), text)
        title = f"Fabric validation {report['run_id']}"
        for name in ("heatmap.png", "plot.png"):
            path = os.path.join(run_dir, name)
            if name not in figures["files"]:
                # A figure of an earlier run under the same run id would contradict this report.
                if os.path.exists(path):
                    os.unlink(path)
            elif name == "heatmap.png":
                draw_heatmap(heatmap_grid(report["checks"]), title, path)
            else:
                draw_plot(plot_series(report["hosts"], report["checks"]), title, path)
        return result
