"""The intent as the registry of concerns makes it, in-process on the lab's inventory (inventories/lab, real
templating with the collection's filters; no host is called): each concern's arguments are made once per host, the
site's later calls take them from the intent document (after a JSON round trip, as the fact travels) with only what
it leaves out made again, and the result is what the role's variables give."""

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.usefixtures("collection_loader")

# inventories/lab reads the lab mirror's description from a file `make lab` writes; these tests give it instead.
LAB_MIRROR = {"fingerprint": "EB693B3035CD5710E231E123A4B469963BF863CC", "variants": {"signed": "http://10.89.80.1/x"}}
FACTS = {"os_family": "Debian", "distribution": "Debian", "distribution_major_version": "12", "architecture": "x86_64"}


def _hosts():
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader
    from ansible.vars.hostvars import HostVars
    from ansible.vars.manager import VariableManager

    loader = DataLoader()
    inventory = InventoryManager(loader=loader, sources=[str(ROOT / "inventories" / "lab" / "hosts.yml")])
    manager = VariableManager(loader=loader, inventory=inventory)
    manager._hostvars = HostVars(inventory=inventory, variable_manager=manager, loader=loader)
    for host in sorted(inventory.get_hosts(), key=lambda h: h.name):
        task_vars = manager.get_vars(host=host)
        task_vars.update(
            lab_mirror=LAB_MIRROR, ansible_facts=dict(FACTS), ansible_run_tags=["all"], ansible_skip_tags=[]
        )
        yield loader, host.name, task_vars


def _checks(loader, task_vars):
    from ansible.template import Templar
    from ansible_collections.gpucluster.fabric.plugins.plugin_utils import role_checks

    def no_host(name, args):
        raise AssertionError(f"no host is called here ({name})")

    return role_checks.Checks(Templar(loader=loader, variables=task_vars), loader, task_vars, no_host, lambda s, r: s)


def _json(value):
    return json.loads(json.dumps(value))


def _roles(task_vars):
    from ansible_collections.gpucluster.fabric.plugins.filter.preflight import site_roles

    groups = task_vars["groups"]
    host = task_vars["inventory_hostname"]
    return site_roles(None, host in groups["gpu_nodes"], host in groups["subnet_managers"])


def test_each_concern_is_made_once_per_host_and_the_site_takes_it_from_the_intent():
    from ansible_collections.gpucluster.fabric.plugins.module_utils import concerns
    from ansible_collections.gpucluster.fabric.plugins.module_utils.intent import document
    from ansible_collections.gpucluster.fabric.plugins.plugin_utils.role_checks import RoleVars

    seen = set()
    for loader, host, task_vars in _hosts():
        roles = _roles(task_vars)
        applied = [role for role in roles if concerns.get(role).module]
        # The preflight: one view per role, each concern's arguments made once, however often they are read.
        checks = _checks(loader, task_vars)
        before = RoleVars.parts_made
        parts = {role: checks.intent(role) for role in roles}
        for role in roles:
            checks.intent(role)
        assert RoleVars.parts_made - before == len(applied), host
        assert checks.views_made == len(roles), host
        fact = json.loads(json.dumps(document(host, parts)))  # as the fact reaches a later play
        # A later play (module apply): the intent's part and what it leaves out, no concern made again ...
        later = _checks(loader, task_vars)
        before = RoleVars.parts_made
        from_intent = {role: later.applier_args(role, fact) for role in applied}
        assert RoleVars.parts_made == before, host
        assert {made for _args, made in from_intent.values()} == {"intent"}, host
        # ... and the same arguments as a host without the site preflight gets, made from its variables.
        alone = _checks(loader, task_vars)
        for role in applied:  # as either reaches the module: JSON (a dict's integer keys become strings)
            assert _json(from_intent[role][0]) == _json(alone.applier_args(role)[0]), (host, role)
            seen.add(role)
    assert seen == set(concerns.applied())


def test_what_the_intent_leaves_out_is_not_in_it():
    """The run's tags, the host's name and OpenSM's keys (opensm.conf) are made per run, never kept on the node."""
    from ansible_collections.gpucluster.fabric.plugins.module_utils import concerns

    for loader, host, task_vars in _hosts():
        checks = _checks(loader, task_vars)
        for role in _roles(task_vars):
            concern = concerns.get(role)
            part = checks.intent(role)
            applier = part.get("applier", part) if role == "opensm" else part
            assert not set(concern.leave_out) & set(applier), (host, role)
            if role == "opensm":
                keys = [str(task_vars[f"opensm_{name}_key"]) for name in ("m", "sm", "sa")]
                assert all(len(key) > 3 for key in keys), keys
                assert all(key in checks.applier_args(role)[0]["conf"] for key in keys), host  # opensm.conf has them
                assert not any(key in json.dumps(part) for key in keys), host
                # The partitions as the model the file is rendered from, which the node check judges the fabric by.
                listed = part["partition_list"]
                assert listed[0]["name"] == "Default" and listed[0]["pkey"] == 0x7FFF, host
                for partition in listed[1:]:
                    assert f"{partition['name']}={partition['pkey']:#06x}" in part["applier"]["partitions"], host


def test_a_role_whose_part_was_masked_is_made_from_its_variables():
    """A URL's user and password are masked in the intent: apply makes that role's arguments from the variables."""
    from ansible_collections.gpucluster.fabric.plugins.module_utils.intent import document

    loader, host, task_vars = next(iter(_hosts()))
    checks = _checks(loader, task_vars)
    part = checks.intent("rdma_core")
    fact = document(host, {"rdma_core": {**part, "distribution": "https://u:p@example/"}})
    assert fact["masked"] == ["rdma_core"]
    made = _checks(loader, task_vars).applier_args("rdma_core", fact)
    assert made == (checks.view("rdma_core").applier_args(), "variables")


def test_an_intent_the_applier_would_refuse_is_not_made():
    """The intent is typed as the applier's own argument spec types it, on the controller as on the node: a value the
    spec refuses (which the role's argument spec refuses first, in the preflight) makes no intent."""
    from ansible.errors import AnsibleError

    loader, _host, task_vars = next(iter(_hosts()))
    task_vars = dict(task_vars, rdma_core_memlock_pam="maybe")
    checks = _checks(loader, task_vars)
    assert checks.view("rdma_core").applier_args()["memlock_pam"] == "maybe"  # apply hands it on: the module refuses
    with pytest.raises(AnsibleError, match="memlock_pam"):
        checks.intent("rdma_core")
