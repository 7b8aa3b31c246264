"""Every package the runtime code imports is declared in pyproject.toml, and every package ships."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from pathlib import Path

import setuptools

ROOT = Path(__file__).resolve().parents[2]
OWN = ("proxy", "translators", "config")
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def imported_tops() -> set[str]:
    tops: set[str] = set()
    for package in OWN:
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    tops.update(alias.name.split(".")[0] for alias in node.names)
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    tops.add(node.module.split(".")[0])
    return {top for top in tops if top not in sys.stdlib_module_names and top not in OWN}


def test_every_directly_imported_package_is_declared() -> None:
    declared = {
        re.split(r"[<>=!~ \[;]", spec, maxsplit=1)[0].replace("-", "_").lower()
        for spec in PYPROJECT["project"]["dependencies"]
    }
    assert imported_tops() - declared - set(OPTIONAL) == set()


# imported only when installed, from an extra: import name -> (extra, a distribution it lists)
OPTIONAL = {"opentelemetry": ("otel", "opentelemetry-sdk")}


def test_optional_imports_come_from_their_extra() -> None:
    extras = PYPROJECT["project"]["optional-dependencies"]
    for top, (extra, distribution) in OPTIONAL.items():
        assert top in imported_tops()
        assert any(spec.startswith(distribution) for spec in extras[extra])


def test_every_package_directory_is_found_by_setuptools() -> None:
    """The wheel holds every package directory (a folder missed here would import in the checkout
    and fail once installed)."""
    found = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for package in OWN
        for init in (ROOT / package).rglob("__init__.py")
    }
    include = PYPROJECT["tool"]["setuptools"]["packages"]["find"]["include"]
    assert set(setuptools.find_packages(str(ROOT), include=include)) == found
