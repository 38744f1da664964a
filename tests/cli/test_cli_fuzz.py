"""A slice of the command-line fuzz campaign (``scripts/fuzz_cli.py``): a few hundred random cases in CI.

The full campaign (about 10,000 cases, its figures in docs/measured.md) runs the same families with more cases each.
Every case must end with an exit code of the contract, one message, no traceback.
"""

from __future__ import annotations

from collections import Counter

import pytest

from support.scripts_loader import load_script

fuzz = load_script("fuzz_cli")

pytestmark = pytest.mark.slow


SLICE = {
    "answer": 80,
    "prompt": 50,
    "store": 25,
    "check_options": 60,
    "calibration": 20,
    "chunks": 40,
    "datasets": 30,
    "databases": 15,
    "argv": 30,
    "dressed": 30,
    "forged": 30,
    "keyed_logs": 10,
    "long_ints": 15,
}
INVOCATIONS = {"keyed_logs": 2, "forged": 2}  # commands run per case (keyed_logs: log verify, then check --request-id;
# forged: the swapped question's check, then the forged record's)
REACHES = {"keyed_logs": 3}  # the exit code a family is built to reach (2, unusable input, for the others)


def test_the_slice_covers_every_family() -> None:
    assert set(SLICE) == set(fuzz.FAMILIES)
    assert sum(SLICE.values()) >= 300


@pytest.fixture(scope="module")
def slice_counts() -> dict[str, Counter[int]]:
    """Run the slice once: exit-code counts per family (a broken contract fails the run inside the family)."""
    with fuzz.campaign_folder() as campaign:
        for number, family in enumerate(sorted(SLICE)):
            fuzz.run_family(campaign, family, SLICE[family], seed_value=number)
        return dict(campaign.counts)


@pytest.mark.parametrize("family", sorted(SLICE))
def test_random_inputs_end_in_the_contract(slice_counts: dict[str, Counter[int]], family: str) -> None:
    counts = slice_counts[family]
    assert sum(counts.values()) == SLICE[family] * INVOCATIONS.get(family, 1)  # every case ran
    assert set(counts) <= fuzz.CONTRACT
    assert counts[REACHES.get(family, 2)] > 0  # the families are built to reach the input (or integrity) errors


def test_the_slice_reaches_passes_findings_and_integrity_failures(slice_counts: dict[str, Counter[int]]) -> None:
    seen = {code for counts in slice_counts.values() for code in counts}
    assert {0, 1, 2, 3} <= seen
