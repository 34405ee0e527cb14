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


def test_a_bench_that_must_follow_another_runs_after_it_in_the_same_lane():
    from bench.smoke import RUNS_AFTER, lane_units

    for reader, builder in RUNS_AFTER.items():
        units = lane_units(list(SMOKE_RUNS))
        holding = [unit for unit in units if reader in unit]
        assert len(holding) == 1 and holding[0].index(builder) < holding[0].index(reader), units
        assert sorted(module for unit in units for module in unit) == sorted(SMOKE_RUNS)
        assert lane_units([reader]) == [[reader]]


def test_benches_in_parallel_lanes_never_share_a_redis_or_postgresql_database():
    from bench.smoke import environment_for, redis_url

    redis = [redis_url(module) for module in SMOKE_RUNS if redis_url(module)]
    databases = [environment_for(module)["CKPTWEB_BENCH_DATABASE"] for module in SMOKE_RUNS]
    assert len(set(redis)) == len(redis) and all(0 <= int(url.rsplit("/", 1)[1]) <= 15 for url in redis), redis
    assert len(set(databases)) == len(databases), databases
