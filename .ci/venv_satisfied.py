"""Exit 0 if the running interpreter already satisfies a requirement source, else 1.

    .venv/bin/python .ci/venv_satisfied.py pyproject.toml test      # project (editable here) +
    extra .venv-legacy/bin/python .ci/venv_satisfied.py tests/peers/requirements-legacy.txt

Used by the Makefile to adopt a virtualenv that exists without its stamp file (created by
hand with the same pip command) instead of reinstalling it. Anything it cannot judge counts
as unsatisfied, so `pip install` runs. Needs only the standard library and pip's vendored
`packaging`.
"""

from __future__ import annotations

import json
import sys
import tomllib
from importlib import metadata
from pathlib import Path

from pip._vendor.packaging.requirements import InvalidRequirement, Requirement


def satisfied(line: str, extra: str = "") -> bool:
    try:
        requirement = Requirement(line)
    except InvalidRequirement:
        return False
    if requirement.marker is not None and not requirement.marker.evaluate({"extra": extra}):
        return True
    try:
        version = metadata.version(requirement.name)
    except metadata.PackageNotFoundError:
        return False
    return requirement.specifier.contains(version, prereleases=True)


def editable_here(name: str, project_dir: Path) -> bool:
    """The project is installed, editable, from `project_dir` (not from another checkout)."""
    try:
        direct_url = metadata.distribution(name).read_text("direct_url.json")
    except metadata.PackageNotFoundError:
        return False
    if not direct_url:
        return False
    info = json.loads(direct_url)
    url = str(info.get("url", ""))
    return bool(info.get("dir_info", {}).get("editable")) and url == project_dir.resolve().as_uri()


def pyproject_ok(path: Path, extra: str) -> bool:
    project = tomllib.loads(path.read_text(encoding="utf-8"))["project"]
    lines = list(project.get("dependencies", []))
    if extra:
        lines += project.get("optional-dependencies", {}).get(extra, [])
    scripts_ok = all(
        (Path(sys.executable).parent / script).exists() for script in project.get("scripts", {})
    )
    return (
        editable_here(project["name"], path.parent)
        and scripts_ok
        and all(satisfied(line) for line in lines)
    )


def requirements_ok(path: Path) -> bool:
    lines = [
        line.split("#", 1)[0].strip() for line in path.read_text(encoding="utf-8").splitlines()
    ]
    lines = [line for line in lines if line]
    return not any(line.startswith("-") for line in lines) and all(
        satisfied(line) for line in lines
    )


def main(argv: list[str]) -> int:
    path = Path(argv[0])
    ok = (
        pyproject_ok(path, argv[1] if len(argv) > 1 else "")
        if path.name == "pyproject.toml"
        else requirements_ok(path)
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
