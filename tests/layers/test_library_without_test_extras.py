"""The library runs on a plain install: no module of minisched (but the exhibits, which say what
they need) imports a package that only the `test` extra installs. Each check runs in a fresh
interpreter whose import system refuses those packages, as a plain install would not have them."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# the test extra's own packages (pyproject.toml) and grimp, which import-linter brings
TEST_ONLY = ("hypothesis", "pytest", "nbval", "mypy", "importlinter", "grimp", "playwright", "nbgrader", "ruff")

_REFUSE = textwrap.dedent(f"""
    import importlib.abc, sys
    TEST_ONLY = {TEST_ONLY!r}

    class Refuse(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in TEST_ONLY:
                raise ModuleNotFoundError(f"No module named {{name!r}} (refused: test-only)", name=name)
            return None

    for name in [m for m in sys.modules if m.split(".")[0] in TEST_ONLY]:
        del sys.modules[name]
    sys.meta_path.insert(0, Refuse())
""")


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", _REFUSE + textwrap.dedent(code)], cwd=ROOT, text=True,
                          capture_output=True, timeout=240, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin",
                                                                 "MPLBACKEND": "Agg", "HOME": str(Path.home())})


def test_no_library_module_imports_a_test_only_package() -> None:
    result = _run("""
        import importlib, pkgutil, minisched
        failed = []
        for info in pkgutil.walk_packages(minisched.__path__, "minisched."):
            name = info.name
            if name.startswith("minisched.exhibits") or name.rsplit(".", 1)[-1] == "__main__":
                continue  # exhibits say what they need; a __main__ runs a command when imported
            try:
                importlib.import_module(name)
            except ImportError as err:
                failed.append(f"{name}: {err}")
        print("\\n".join(failed) or "ok")
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok", f"library modules that need a test-only package:\n{result.stdout}"


def test_the_refusal_is_real_and_an_exhibit_names_the_extra_it_needs() -> None:
    result = _run("""
        try:
            import hypothesis
        except ModuleNotFoundError:
            print("hypothesis refused")
        try:
            import minisched.exhibits.queue_machine
        except ImportError as err:
            print(err)
    """)
    assert result.returncode == 0, result.stderr
    refused, message = result.stdout.splitlines()
    assert refused == "hypothesis refused"
    assert message.startswith("minisched.exhibits.queue_machine needs hypothesis") and \
        "pip install 'minisched[exhibits]'" in message, message
