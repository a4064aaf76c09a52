"""A Local node's start: the version check runs in its agent's interpreter, a node that
runs the client's own interpreter is not handed requirements it never installs, and the
agent's interpreter imports only what a node needs to answer."""

from __future__ import annotations

import platform
import subprocess
import sys

from skyward import bootstrap
from skyward.bootstrap import CLIENT_PYTHON, render_bootstrap
from skyward.image import BootstrapContext, Image
from skyward.providers.contexts import local_bootstrap_context


def test_a_local_node_checks_its_python_in_the_agent_s_own_interpreter() -> None:
    script = render_bootstrap(Image(), 600, BootstrapContext(local=True, python_executable=sys.executable))
    agent = script[script.index('exec "$PY" -c') :]
    assert "SKYWARD_CHECK" not in script  # no interpreter of its own for the check
    assert "want_py" in agent and agent.rstrip().endswith("' -m skyward.agent")


def test_a_cloud_node_still_checks_its_python_as_a_step_of_its_own() -> None:
    script = Image(pip=["six"]).bootstrap(ttl=600)
    assert script.index("SKYWARD_CHECK") < script.index('"$PY" -m skyward.agent')


def test_a_failed_check_in_the_agent_s_interpreter_exits_1_with_its_message_and_runs_nothing() -> None:
    check = bootstrap._CHECK.replace(repr(CLIENT_PYTHON), repr("2.7"), 1) + bootstrap._RUN_MODULE
    done = subprocess.run(
        [sys.executable, "-c", check, "-m", "no_such_module_would_run"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert "both sides must use the same minor version" in done.stderr


def test_the_check_then_runs_the_module_named_after_it_as_python_m_would() -> None:
    code = bootstrap._CHECK + bootstrap._RUN_MODULE
    done = subprocess.run(
        [sys.executable, "-c", code, "-m", "platform"], capture_output=True, text=True, timeout=60, check=False
    )
    # platform's __main__ block prints the platform: the module ran as __main__, given no arguments
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == platform.platform()


def test_a_local_context_without_pip_packages_skips_the_client_s_requirements() -> None:
    bare = local_bootstrap_context(Image())
    assert bare.skyward_requirement is None and bare.pinned == ()
    with_pip = local_bootstrap_context(Image(pip=["six"]))
    assert with_pip.skyward_requirement is not None and any(p.startswith("cloudpickle==") for p in with_pip.pinned)


def test_a_node_s_agent_starts_without_the_modules_only_rare_paths_use() -> None:
    # pathlib, subprocess and socket cost a node ~12 ms of its ~70 ms start on a 2-core
    # machine (measured against `import zmq, cloudpickle`): only notices, MIG nodes, spawned
    # workers, a stale ipc path and files need them, and they import them there
    code = (
        "import sys\n"
        "import skyward.agent.supervisor\n"
        "print(sorted(m for m in ('pathlib', 'subprocess', 'socket', 'skyward.api', 'skyward.plugins') "
        "if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "[]"
