"""The suite's own rules: a pinned package missing fails, a cloud pass that finds no test fails."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from skip_policy import required_import_skipped, required_imports

ROOT = Path(__file__).resolve().parents[2]


def _tasks() -> object:
    spec = importlib.util.spec_from_file_location("skyward_tasks", ROOT / "tasks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["skyward_tasks"] = module
    spec.loader.exec_module(module)
    return module


def test_a_skip_for_a_pinned_package_is_recognised_and_others_are_not() -> None:
    required = required_imports("torch==2.13.0\ntensorflow-cpu==2.21.0\njax[cpu]==0.10.2\n# note\n-e x\n")
    assert required >= {"torch", "tensorflow", "jax", "skyward_example_plugin"}
    assert required_import_skipped("could not import 'torch': No module named 'torch'", required) == "torch"
    assert required_import_skipped("could not import 'tensorflow.keras': boom", required) == "tensorflow"
    assert required_import_skipped("could not import 'cupy': No module named 'cupy'", required) is None
    assert required_import_skipped("needs root", required) is None


def test_the_real_test_requirements_pin_the_distributed_backends() -> None:
    required = required_imports((ROOT / "requirements-dev.txt").read_text())
    assert {"torch", "jax", "keras", "tensorflow", "transformers", "accelerate", "sklearn"} <= required


def test_a_whole_cloud_pass_that_collects_no_test_fails() -> None:
    tasks = _tasks()
    cloud_result = tasks.cloud_result  # type: ignore[attr-defined]
    assert cloud_result(5, []) == 5  # the whole suite, and not one cloud test: broken
    assert cloud_result(5, ["tests/unit"]) == 0  # a chosen part without cloud tests
    assert cloud_result(0, []) == 0 and cloud_result(1, ["tests/aws"]) == 1
