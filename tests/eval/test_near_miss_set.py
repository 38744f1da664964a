"""scripts/near_miss_set.py on a small self-made file in SQuAD's format (CI has no SQuAD data).

What is asserted is what the script guarantees: the set's items by kind, the halves split by article, every rate
a share in 0..1, the held-out curve and its areas present, and an older params file (features named once at the
top) read with the features it names.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PARAGRAPH = (
    "The final of {t} was a football game to decide the champion of the league. "
    "The final of {t} was played on February 7, 2016, at Harbor Stadium in Santa Clara. "
    "The home side of {t} defeated the visitors 24 to 10 to earn their third title."
)


def _script():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("near_miss_set", ROOT / "scripts" / "near_miss_set.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _squad(path: Path) -> Path:
    articles = []
    for title in ("Alpha Cup", "Beta Cup", "Gamma Cup", "Delta Cup"):
        context = PARAGRAPH.format(t=title)
        where = context.index("Harbor Stadium")
        when = context.index("February 7, 2016")
        qas = [
            {"question": f"Where was the final of {title} played?", "is_impossible": False,
             "answers": [{"text": "Harbor Stadium", "answer_start": where}]},
            {"question": f"When was the final of {title} played?", "is_impossible": False,
             "answers": [{"text": "February 7, 2016", "answer_start": when}]},
            {"question": f"Who sponsored the final of {title}?", "is_impossible": True, "answers": []},
        ]  # fmt: skip
        articles.append({"title": title, "paragraphs": [{"context": context, "qas": qas}]})
    path.write_text(json.dumps({"data": articles}), encoding="utf-8")
    return path


def test_the_script_reports_shares_a_curve_and_areas_on_the_held_out_half(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = _script()
    assert script.main(["--squad", str(_squad(tmp_path / "s.json")), "--json", "--far", "1"]) == 0
    report = json.loads(capsys.readouterr().out)
    halves = report["counts"]["articles"]
    assert sorted(halves["tune"] + halves["heldout"]) == ["Alpha Cup", "Beta Cup", "Delta Cup", "Gamma Cup"]
    assert len(halves["tune"]) == 2 and len(halves["heldout"]) == 2
    assert report["counts"]["heldout_on"] == 4  # two answerable questions per held-out article, one gold sentence
    assert report["counts"]["heldout_near"] == 8 and report["counts"]["heldout_far"] == 4
    for row in report["rows"].values():
        assert all(0.0 <= row[k] <= 1.0 for k in ("near_recall", "far_recall", "on_false_flags"))
    assert set(report["curve_heldout"]) == {"3%", "5%", "10%", "20%"}
    assert all(0.0 <= v <= 1.0 for v in report["auc_heldout"].values())


def test_an_older_params_file_is_read_with_the_features_it_names(tmp_path: Path) -> None:
    script = _script()
    shipped = json.loads(script.PARAMS.read_text(encoding="utf-8"))
    rules = {"weights": [1.0, 2.0], "bias": 0}  # an older file: the features named once, at the top
    older = {"features": ["coverage", "focus"], "source": "old", "models": {"rules": rules}}
    path = tmp_path / "old.json"
    path.write_text(json.dumps(older), encoding="utf-8")
    model = script._model(script.argparse.Namespace(fit=False, params=path), "rules", [])
    assert model.features == ("coverage", "focus") and model.weights == (1.0, 2.0)
    assert len(shipped["models"]["rules"]["features"]) == len(shipped["models"]["rules"]["weights"])
