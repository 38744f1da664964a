"""The docs site's generated pages are current, every public name is in the API reference, the README stays short.

``mkdocs build --strict`` itself (broken links, pages missing from the nav, docstring references that do not
resolve) runs in ``scripts/test.sh`` and ``nox -s docs``; these tests need no mkdocs.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from support.scripts_loader import load_script

ROOT = Path(__file__).resolve().parents[2]
API = ROOT / "docs" / "reference" / "api"


@pytest.fixture(scope="module")
def api_script() -> ModuleType:
    return load_script("gen_api_reference")


@pytest.fixture(scope="module")
def cli_script() -> ModuleType:
    return load_script("gen_cli_reference")


def test_cli_reference_is_the_generated_one(cli_script: ModuleType) -> None:
    page = (ROOT / "docs" / "reference" / "cli.md").read_text(encoding="utf-8")
    assert page == cli_script.cli_reference(), "docs/reference/cli.md is stale: run python scripts/gen_cli_reference.py"


def test_cli_reference_has_every_command_and_option(cli_script: ModuleType) -> None:
    import typer

    from citelock.cli import app

    page = cli_script.cli_reference()

    def walk(command: Any, path: list[str]) -> None:
        assert f"## `{' '.join(path)}` {{#{'-'.join(path)}}}" in page, path
        section = page.split(f"`{' '.join(path)}` {{#", 1)[1]
        for param in command.params:
            if param.param_type_name == "option" and not param.hidden:
                assert f"`{param.opts[0]}`" in section.split("\n#", 1)[0], (path, param.opts)
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, [*path, name])

    walk(typer.main.get_command(app), ["citelock"])
    assert "`citelock check` {#citelock-check}" in page and "`citelock queue list` {#citelock-queue-list}" in page


def test_cli_script_checks_and_writes(cli_script: ModuleType, tmp_path: Path) -> None:
    page = tmp_path / "cli.md"
    assert cli_script.main(["--check", "--page", str(page)]) == 1 and not page.exists()
    assert cli_script.main(["--page", str(page)]) == 0
    assert page.read_text(encoding="utf-8") == cli_script.cli_reference()
    assert cli_script.main(["--check", "--page", str(page)]) == 0


def test_api_reference_is_the_generated_one(api_script: ModuleType) -> None:
    wanted = api_script.render(api_script.pages())
    present = {path.name: path.read_text(encoding="utf-8") for path in API.glob("*.md")}
    assert present == wanted, "docs/reference/api is stale: run python scripts/gen_api_reference.py"
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    assert api_script.with_nav(config, api_script.pages()) == config, "mkdocs.yml's API nav is stale"


def _resolve(path: str) -> Any:
    """The object at dotted ``path``: the longest importable module prefix, then attributes."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            value: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attribute in parts[cut:]:
            value = getattr(value, attribute)
        return value
    raise AssertionError(f"{path}: nothing importable")


def _public_modules() -> list[ModuleType]:
    import pkgutil

    import citelock

    found = [citelock]
    for info in pkgutil.iter_modules(citelock.__path__):
        if not info.name.startswith("_"):
            module = importlib.import_module(f"citelock.{info.name}")
            if getattr(module, "__all__", None):
                found.append(module)
    return found


def test_every_public_name_is_rendered_in_the_api_reference() -> None:
    pages = {path.name: path.read_text(encoding="utf-8") for path in API.glob("*.md")}
    directives = [line[4:].strip() for text in pages.values() for line in text.splitlines() if line.startswith("::: ")]
    rendered = [_resolve(path) for path in directives]
    modules = _public_modules()
    assert {"citelock", "citelock.store", "citelock.judges", "citelock.guard"} <= {m.__name__ for m in modules}
    missing = []
    for module in modules:
        page = pages.get("index.md" if module.__name__ == "citelock" else f"{module.__name__[9:]}.md", "")
        assert f"::: {module.__name__}\n" in page, f"no API page for {module.__name__}"
        for name in module.__all__:
            value = getattr(module, name)
            on_page = re.search(rf"(heading: {re.escape(name)}$|^### {re.escape(name)}$)", page, re.M)
            if not on_page or not any(value is other for other in rendered):
                missing.append(f"{module.__name__}.{name}")
    assert not missing, f"public names missing from the API reference: {missing}"


def test_each_object_is_rendered_once(api_script: ModuleType) -> None:
    all_pages = api_script.pages()
    modules = {page.module for page in all_pages}
    texts = api_script.render(all_pages).values()
    directives = [line[4:] for text in texts for line in text.splitlines() if line.startswith("::: ")]
    objects = [path for path in directives if path not in modules]
    assert len(objects) > 100
    assert len(objects) == len(set(objects)), [path for path in objects if objects.count(path) > 1]


def test_api_script_writes_and_removes_stale_pages(api_script: ModuleType, tmp_path: Path) -> None:
    out = tmp_path / "api"
    out.mkdir()
    (out / "gone.md").write_text("# a module that no longer exists\n", encoding="utf-8")
    config = tmp_path / "mkdocs.yml"
    config.write_text(f"nav:\n{api_script.NAV_BEGIN}\n          - old: x.md\n{api_script.NAV_END}\n", encoding="utf-8")
    args = ["--out", str(out), "--mkdocs", str(config)]
    assert api_script.main(["--check", *args]) == 1 and (out / "gone.md").exists()
    assert api_script.main(args) == 0
    assert not (out / "gone.md").exists() and (out / "index.md").is_file()
    assert "          - citelock: reference/api/index.md\n" in config.read_text(encoding="utf-8")
    assert api_script.main(["--check", *args]) == 0


def _python_block(text: str) -> str:
    match = re.search(r"```python\n(.*?)```", text, re.S)
    assert match, "no python block"
    return match.group(1)


def test_readme_tour_is_the_client_guides_snippet() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    guide = (ROOT / "docs" / "guides" / "client.md").read_text(encoding="utf-8")
    tour = readme[readme.index("### Or let citelock make the call") :]
    assert _python_block(tour) == _python_block(guide)


def test_readme_is_short_and_keeps_the_two_commands() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 200
    tour = readme[readme.index("## A five-minute tour") : readme.index("## Documentation")]
    assert len(tour.splitlines()) <= 70  # about 60, with the streaming web handler #23 asks the tour to show
    commands = re.findall(r"```bash\n(.*?)```", readme[: readme.index("## A five-minute tour")], re.S)
    assert commands[-1].strip() == "bash scripts/test.sh"
    assert commands[0].strip().endswith("--surface docs --stakes high --on-fail drop_claim")
    home = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    assert all(f"```bash\n{command}```" in home for command in commands), "docs/index.md lost one of the commands"
    assert "bash scripts/test.sh" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")
