# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""The registry of concerns: every concern the collection manages, once, in site.yml's order, with the hosts it
applies to, its applier module and where that module's arguments come from (the role's variables), which of them are
the concern's part of the intent, and the tags that select it.

Whatever lists the concerns, or needs an applier's arguments, reads them here: the site preflight's roles (filter
site_roles) and checks, module apply (site.yml's plays and each role's own task), the intent's parts
(plugins/plugin_utils/role_checks.py builds them from a host's variables with ``args``), the appliers a node runs
(``appliers``: module node_apply and the node check), and the documentation's choices; tests/repo/test_concerns.py
fails on a list of concern names anywhere else. No code reads a role's task file: a task file is a task.
Standard library only (Python 3.8 targets).
"""

from collections import namedtuple

# The code of the appliers the node runs (``code`` of each concern with ``drift``): imported here, so that whatever
# imports the registry on the node carries them (Ansible's module packer and the node check's installer follow
# imports). A concern whose code is missing here fails ``appliers()`` at once.
from . import (  # noqa: F401  # pylint: disable=unused-import
    cuda_repo_probe,
    fabric_interfaces_apply,
    hca_firmware,
    nccl,
    opensm_apply,
    rdma_core,
    rdma_modules,
    roce_qos_node,
)

# role: the role (and the concern's name); hosts: "gpu" (the GPU nodes), "sm" (the subnet managers) or "every";
# module: its applier module (None: fabric_validate, which measures); args: {the module's argument: where its value
# comes from}, a source being a variable of the role's view (its defaults, the host's variables, its vars), a list of
# such variables, "@<what>" (a value the controller derives: role_checks.DERIVED) or a constant (True, False);
# leave_out: the arguments that steer the run only (tags, the host's name, controller-side helpers), not the intent;
# drift: whether the node check runs the module in check mode (``appliers``) for its drift; in_apply: whether
# site.yml applies it with others in one call (module apply's ``roles``); code: the module_utils module holding the
# module's code (its run, its argument spec ``spec``, and nothing_to_apply(args) where some arguments leave nothing
# to do); spec, run: the names of its argument spec and its entry point in ``code``; tags: the tags its role's task
# carries and that select it in a play of several; without: what the preflight adds to a missing required value,
# where a site can do without the concern; publishes: the results and facts its role's tasks publish for other roles
# and playbooks (declared names: the preflight never takes a cached one for a misspelt variable); part: what the
# concern's part of the intent holds beside its applier's arguments (then kept under ``applier``), {key: (source, the
# key's option: its type)}: what the node check reads, typed and checked by the same option on both ends.
Concern = namedtuple(
    "Concern",
    (
        "role",
        "hosts",
        "module",
        "args",
        "leave_out",
        "drift",
        "in_apply",
        "code",
        "spec",
        "run",
        "tags",
        "without",
        "publishes",
        "part",
    ),
)


def _own(role, *names):
    """{name: <role>_<name>}: the arguments named as the role's variables are."""
    return {name: f"{role}_{name}" for name in names}


_COMMON = {"host": "@host", "header": "@header"}
_TAGS = {"run_tags": "@run_tags", "skip_tags": "@skip_tags"}


def _concern(role, hosts, module, args, leave_out=("host",), drift=True, in_apply=True, code=None, **more):
    return Concern(
        role,
        hosts,
        module and f"gpucluster.fabric.{module}",
        args,
        tuple(leave_out),
        drift,
        in_apply,
        code,
        more.get("spec", "ARGUMENT_SPEC"),
        more.get("run", "run"),
        tuple(more.get("tags", ())),
        more.get("without"),
        tuple(more.get("publishes", ())),
        dict(more.get("part", {})),
    )


CONCERNS = (
    _concern(
        "rdma_core",
        "gpu",
        "rdma_core",
        {
            **_COMMON,
            "os_family": "@os_family",
            "distribution": "@distribution",
            "supported_families": "__rdma_core_supported_families",
            **_own("rdma_core", "memlock", "memlock_pam", "memlock_systemd", "extra_packages", "services"),
            "packages": "__rdma_core_packages",
        },
        code="rdma_core",
    ),
    _concern(
        "rdma_modules",
        "gpu",
        "rdma_modules",
        {
            **_COMMON,
            "mode": "rdma_modules_gpudirect_mode",
            "nccl_version": "rdma_modules_nccl_version",
            "core_modules": "rdma_modules_core",
            "extra_modules": "rdma_modules_extra",
            "interfaces": "rdma_modules_fabric_interfaces",
            **_own("rdma_modules", "hca_detect", "hca_driver_map", "hca_unbound_modules", "softdeps", "runtime_load"),
            **_own("rdma_modules", "peermem_force", "acs_clear"),
        },
        code="rdma_modules",
        publishes=["gpucluster_gpudirect"],
    ),
    _concern(
        "hca_firmware",
        "gpu",
        "hca_firmware",
        {"host": "@host", **_own("hca_firmware", "settings", "devices", "apply")},
        code="hca_firmware",
    ),
    _concern(
        "fabric_interfaces",
        "gpu",
        "fabric_interfaces",
        {
            "interfaces": "fabric_interfaces",
            "backend": "fabric_interfaces_backend",
            "sysctls": "__fabric_interfaces_sysctls",
            **_own("fabric_interfaces", "sysctl_file", "apply_runtime", "link_down_ok"),
            **_TAGS,
            **_COMMON,
        },
        leave_out=("run_tags", "skip_tags", "host"),
        code="fabric_interfaces_apply",
        tags=[f"fabric_interfaces_{step}" for step in ("preflight", "configure", "sysctl", "run", "softroce")],
        without="or leave fabric_interfaces out of gpucluster_roles",
        publishes=["gpucluster_fabric_interfaces"],
    ),
    _concern(
        "roce_qos",
        "gpu",
        "roce_qos",
        {
            "interfaces": "__roce_qos_settings",
            **_own("roce_qos", "require_pfc", "persist"),
            "boot_wait_seconds": "roce_qos_boot_wait_seconds",
            "header": "@header",
        },
        leave_out=(),
        code="roce_qos_node",
        publishes=["gpucluster_roce_qos"],
    ),
    _concern(
        "cuda_repo",
        "gpu",
        "cuda_repo",
        {
            **_own("cuda_repo", "base_url", "distro", "arch", "keyring_version", "key_fingerprint"),
            "keyring_deb_src": "cuda_repo_keyring_deb",
            **_own("cuda_repo", "verify_signature", "validate_certs"),
            **_TAGS,
            **_COMMON,
        },
        leave_out=("run_tags", "skip_tags", "host", "keyring_deb_src"),
        code="cuda_repo_probe",
        spec="APPLY_ARGUMENT_SPEC",
        run="apply",
        tags=[f"cuda_repo_{step}" for step in ("preflight", "install", "configure")],
        without="or leave cuda_repo out of gpucluster_roles where the site has its own CUDA repository",
        publishes=["cuda_repo_applied"],
    ),
    _concern(
        "nccl",
        "gpu",
        "nccl",
        {
            **_COMMON,
            "nccl_version": "nccl_version",
            "cuda_version": "nccl_cuda_version",
            "package_revision": "nccl_package_revision",
            "conf": "nccl_conf",
            "allow_debug_variables": "nccl_conf_allow_debug_variables",
            **_own("nccl", "conf_path", "ib_addr_family", "ib_gid_index"),
            # The RoCE interfaces (fabric_interfaces, kind roce), whose GID table NCCL before 2.21 needs an index of.
            "roce_interfaces": "@roce_interfaces",
            **_own("nccl", "install_dev", "hold", "allow_version_change"),
            # What the CUDA repository offers, read where apt cannot tell yet (cuda_repo's probe or its check mode).
            "offered_index": "@offered_nccl",
            "before_repository": "@site_preflight",
            "required_features": "nccl_required_features",
            "feature_minimums": "__nccl_feature_minimums",
            "library_in_place": True,
        },
        leave_out=("host", "offered_index", "before_repository", "library_in_place"),
        code="nccl",
        without="or leave nccl out of gpucluster_roles to not manage NCCL here",
        publishes=["nccl_installed"],
    ),
    # OpenSM's keys stay in opensm.conf, which OpenSM reads: its conf is never part of the intent.
    _concern(
        "opensm",
        "sm",
        "opensm",
        {
            "unit": "__opensm_unit",
            "directories": ["__opensm_config_dir", "__opensm_dropin_dir"],
            "partitions_file": "__opensm_partitions_file",
            "partitions": "@opensm_partitions_conf",
            "conf_file": "__opensm_conf_file",
            "conf": "@template:opensm.conf.j2",
            "defaults_file": "__opensm_defaults_file",
            "defaults": "@template:__opensm_defaults_template",
            "dropin_file": "__opensm_dropin_file",
            "dropin": "@template:opensm-unit.conf.j2",
            "packages": "__opensm_packages",
        },
        leave_out=("conf",),
        in_apply=False,
        code="opensm_apply",
        publishes=["opensm_restart_required"],
        # What the node check reads on a subnet manager: the unit, the diagnostics' environment, and the partitions
        # as OpenSM reads them (the model partitions.conf is rendered from), which its isolation checks judge by.
        part={
            "unit": ("__opensm_unit", {"type": "str"}),
            "diag_environment": ("opensm_diag_environment", {"type": "dict"}),
            "partition_list": ("@opensm_partition_list", {"type": "list", "elements": "dict"}),
        },
    ),
    _concern(
        "node_check",
        "every",
        "node_check",
        {
            **_own("node_check", "interval", "timer", "only", "skip", "textfile_dir", "report", "slurm"),
            **_own("node_check", "slurm_node", "slurm_drain_after", "slurm_resume_after", "slurm_max_drained"),
            **_COMMON,
        },
        drift=False,
        in_apply=False,
        code="node_check_install",
        tags=["node_check"],
    ),
    # What the node check reads with and judges by, as the health tier does.
    _concern(
        "fabric_validate",
        "gpu",
        None,
        {},
        leave_out=(),
        drift=False,
        in_apply=False,
        part={
            "tiers": ("fabric_validate_tiers", {"type": "list", "elements": "str"}),
            "expected_rate_gbps": ("fabric_validate_expected_rate_gbps", {"type": "float"}),
            "expected_active_mtu": ("fabric_validate_expected_active_mtu", {"type": "int"}),
            "required_modules": ("fabric_validate_required_modules", {"type": "list", "elements": "str"}),
            "interfaces": ("fabric_validate_interfaces", {"type": "list", "elements": "dict"}),
            "sysfs_root": ("fabric_validate_sysfs_root", {"type": "path"}),
            "max_nic_distance": ("fabric_validate_max_nic_distance", {"type": "str"}),
            "sm_query_host": ("fabric_validate_sm_query_host", {"type": "str"}),
            "sm_query_environment": ("fabric_validate_sm_query_environment", {"type": "dict"}),
            "fleet_packages": ("fabric_validate_fleet_packages", {"type": "list", "elements": "str"}),
        },
    ),
)


def published():
    """The names the concerns' role tasks publish (``publishes``), sorted."""
    return sorted({name for c in CONCERNS for name in c.publishes})


def roles(hosts=None):
    """The concerns' roles in site.yml's order; ``hosts``: only those of that kind of host ("gpu", "sm", "every")."""
    return tuple(c.role for c in CONCERNS if hosts is None or c.hosts == hosts)


def get(role):
    """The concern of ``role``, or None."""
    return next((c for c in CONCERNS if c.role == role), None)


def part_spec(role):
    """The argument spec of ``role``'s part of the intent beside its applier's arguments ({} where it has none)."""
    concern = get(role)
    return {key: dict(option) for key, (_source, option) in concern.part.items()} if concern else {}


def _accepted(args):
    return True


def appliers():
    """{module: (argument spec, run(module), arguments accepted)} of every concern whose applier the node runs: module
    node_apply runs them for module apply, and the node check in check mode for the concern's drift."""
    return {
        c.module: (getattr(globals()[c.code], c.spec), getattr(globals()[c.code], c.run), _accepted)
        for c in CONCERNS
        if c.drift
    }


def applied_together():
    """The roles module apply runs in one call, in site.yml's order."""
    return tuple(c.role for c in CONCERNS if c.in_apply)


def applied():
    """The roles with an applier module: those module apply applies (one at a time from its role's own task)."""
    return tuple(c.role for c in CONCERNS if c.module)
