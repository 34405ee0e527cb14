"""Every benchmark runs in the smoke leg (`make bench-smoke`, bench/smoke.py), so one that stops
running is seen at the next CI run rather than when someone needs its figures again."""

from __future__ import annotations

from pathlib import Path

from bench.smoke import SMOKE_RUNS

BENCH_DIR = Path(__file__).resolve().parent.parent / "bench"
RUNS_ITSELF = "bench.smoke"


def _modules_with_a_main() -> set[str]:
    return {f"bench.{path.stem}" for path in BENCH_DIR.glob("*.py") if 'if __name__ == "__main__":' in path.read_text()}


def test_every_bench_with_a_main_is_in_the_smoke_list():
    missing = _modules_with_a_main() - {RUNS_ITSELF} - set(SMOKE_RUNS)
    assert not missing, f"add these to bench/smoke.py SMOKE_RUNS, at a size that runs in seconds: {sorted(missing)}"


def test_the_smoke_list_names_only_benches_that_exist_and_have_a_main():
    assert set(SMOKE_RUNS) <= _modules_with_a_main(), sorted(set(SMOKE_RUNS) - _modules_with_a_main())
