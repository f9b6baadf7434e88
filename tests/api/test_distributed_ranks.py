"""/api/distributed on a run of 12 ranks made from tests/data (tests/rankset.py): every rank's
measures, the worst ranks by each sort, and the ranks the run lacks (three never written, one
unreadable) named as a warning while the rest of the view works."""

from __future__ import annotations

from pathlib import Path

import pytest

from rankset import write_ranks

pytest.importorskip("httpx", reason="httpx is not installed (pip install -e '.[test]')")

DATA = Path(__file__).resolve().parents[1] / "data"
RUN = "ranks_12"
WORLD = 12
NEVER_WRITTEN = {9, 10, 11}
GARBAGE_RANK = 5  # its file is there, but no JSON


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory, start_app):
    logdir = tmp_path_factory.mktemp("logdir")
    written = write_ranks(DATA / "h200x2" / "ddp_straggler_rank1", logdir / RUN, WORLD, per_node=4,
                          skip=NEVER_WRITTEN)
    garbage = next(p for p in written if f"_{10000 + GARBAGE_RANK}." in p.name)
    garbage.write_bytes(b"\x00 this is no trace {")
    app = start_app(logdir, cache_dir=tmp_path_factory.mktemp("cache"), expect=[RUN], timeout=120)
    yield app
    app.stop()


@pytest.fixture(scope="module")
def body(api) -> dict:
    response = api.get("/api/distributed", {"run": RUN})
    assert response.status_code == 200, response.text
    return response.json()


def test_distributed_ranks_missing_and_unreadable_are_named(body):
    held = [r["rank"] for r in body["ranks"]]
    assert held == [r for r in range(WORLD) if r not in NEVER_WRITTEN | {GARBAGE_RANK}]
    assert body["missing_ranks"] == [5, 9, 10, 11]
    assert "ranks 5, 9–11 of world size 12 have no trace in this span: left out" in body["warnings"]
    unreadable = [w for w in body["warnings"] if f"node001_{10000 + GARBAGE_RANK}" in w]
    assert len(unreadable) == 1 and "could not be read" in unreadable[0], body["warnings"]
    # The rest of the view works: every held rank has its rows, and the straggler is still found.
    for part in ("overlap", "wait", "comm_ops", "comparison", "distribution"):
        assert [r["rank"] for r in body[part]] == held, part
    assert [r["rank"] for r in body["stragglers"]["stragglers"]] == [r for r in held if r % 2 == 1]


def test_distributed_ranks_distribution_from_the_per_rank_rows(body):
    overlap = {r["rank"]: r["average"] for r in body["overlap"]}
    wait = {r["rank"]: r["average"] for r in body["wait"]}
    delay = {r["rank"]: r["median_delay_us"] for r in body["stragglers"]["ranks"]}
    for row in body["distribution"]:
        rank = row["rank"]
        assert row["step_us"] == pytest.approx(overlap[rank]["total_us"])
        assert row["computation_us"] == pytest.approx(overlap[rank]["computation_us"] + overlap[rank]["overlapping_us"])
        assert row["communication_us"] == pytest.approx(wait[rank]["communication_us"])
        assert row["wait_us"] == pytest.approx(wait[rank]["wait_us"])
        assert row["wait_ratio"] == pytest.approx(wait[rank]["wait_us"] / wait[rank]["communication_us"])
        assert row["delay_us"] == pytest.approx(delay[rank])
    # Copies of the slow rank 1 wait less than copies of rank 0, which wait for them.
    by_rank = {r["rank"]: r for r in body["distribution"]}
    assert all(by_rank[r]["wait_us"] < by_rank[0]["wait_us"] for r in by_rank if r % 2 == 1)


@pytest.mark.parametrize("sort", ["step", "wait", "delay"])
def test_distributed_ranks_worst_by_each_sort(api, body, sort):
    top = 3
    got = api.get("/api/distributed", {"run": RUN, "sort": sort, "top": top}).json()["worst"]
    values = {
        "step": {r["rank"]: r["average"]["total_us"] for r in body["overlap"]},
        "wait": {r["rank"]: r["average"]["wait_us"] for r in body["wait"]},
        "delay": {r["rank"]: r["median_delay_us"] for r in body["stragglers"]["ranks"]},
    }[sort]
    expected = sorted(values, key=lambda r: (-values[r], r))[:top]
    assert got == {"sort": sort, "measure": f"{sort}_us", "top": top, "ranks": expected}


def test_distributed_ranks_default_worst_and_bad_parameters(api, body):
    assert body["worst"]["sort"] == "step" and body["worst"]["top"] == 16
    assert sorted(body["worst"]["ranks"]) == [r["rank"] for r in body["ranks"]]  # 8 ranks: all of them
    for params in ({"top": 0}, {"top": "many"}, {"sort": "name"}):
        response = api.get("/api/distributed", {"run": RUN, **params})
        assert response.status_code == 400, (params, response.text)
        assert response.json()["error"]["code"] == "bad_parameter"


def test_distributed_ranks_collective_report_and_delay_map(body):
    assert body["collectives"] and {r["type"] for r in body["collectives"]} == {"all_reduce"}
    for row in body["collectives"]:
        n = row["group_size"]
        assert row["algbw_gbps"] == pytest.approx(row["size_bytes"] * row["count"] / row["transfer_us"] * 1e-3,
                                                  rel=1e-3)
        assert row["busbw_gbps"] == pytest.approx(row["algbw_gbps"] * 2 * (n - 1) / n, rel=1e-3)
    delays = body["delay_map"]
    held = [r["rank"] for r in body["ranks"]]
    assert delays["rows"] == [[r, r] for r in held]     # 8 ranks: below max_rows, one row each
    assert len(delays["delay_us"]) == len(held)
    assert all(len(values) == len(delays["columns"]) for values in delays["delay_us"])
    # Copies of the slow rank 1 are the late ones: each has the largest delay at some collective.
    worst = {held[max(range(len(held)), key=lambda i: delays["delay_us"][i][j] or 0.0)]
             for j in range(len(delays["columns"]))}
    assert worst and all(r % 2 == 1 for r in worst)


def test_distributed_ranks_clock_has_one_row_per_rank(body):
    clock = body["clock"]
    held = [r["rank"] for r in body["ranks"]]
    assert clock["reference"] == held[0]
    assert [r["rank"] for r in clock["ranks"]] == held
    # Copies of one host's two ranks: every clock agrees within a few us.
    assert all(abs(r["offset_us"]) < 12.0 and r["used"] > 0 for r in clock["ranks"])
    assert clock["straggler"] % 2 == 1 and clock["fastest"] % 2 == 0
