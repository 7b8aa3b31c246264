"""docs/configuration.md is what `python -m proxy.app.config_reference` prints from the settings
model and the argument parser, and that names every setting, its variable and every flag."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from config import env_name
from config.loader import setting_fields
from proxy.app.cli_args import build_parser
from proxy.app.config_reference import render

PAGE = Path(__file__).resolve().parents[3] / "docs" / "configuration.md"
REGENERATE = ".venv/bin/python -m proxy.app.config_reference > docs/configuration.md"


def test_the_configuration_page_is_up_to_date_with_the_model_and_the_parser() -> None:
    assert PAGE.read_text(encoding="utf-8") == render(), f"out of date: run `{REGENERATE}`"


def test_the_page_names_every_setting_its_variable_and_default() -> None:
    page = render()
    for dotted in setting_fields():
        assert f'<a id="setting-{dotted.replace(".", "-").replace("_", "-")}"></a>' in page
        assert f"`{dotted}`" in page
        if dotted != "upstreams":  # tables of sections: the file only
            assert f"`{env_name(dotted)}`" in page, dotted
    assert '| `"127.0.0.1:8080"` |' in page  # front.listen's default, as TOML
    assert "| `16777216` | whole number, ≥ 1024 |" in page  # upstream.max_line_bytes


def test_the_page_names_every_flag_of_every_command() -> None:
    page = render()
    parser = build_parser()
    (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    for name, sub in commands.choices.items():
        section = page.split(f"### `mrtr-bridge {name}`\n", 1)[1].split("\n### ", 1)[0]
        for action in sub._actions:
            for flag in action.option_strings:
                if flag not in ("-h", "--help"):
                    assert f"`{flag}`" in section, (name, flag)


def test_the_module_prints_the_page() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "proxy.app.config_reference"],
        cwd=PAGE.parents[1],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout == render()
