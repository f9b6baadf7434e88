"""The trace's store and its provider (server/items.py, server/derived.py, server/provider.py, server/store.py): derived
items read back as they were computed, versions that recompute only what changed, damaged items and
tables, the loader's items waited for, the memory budget, and the overview across ranks."""

from __future__ import annotations

import dataclasses
import inspect
import logging
import os
import shutil
import sys
import tempfile
import threading
import time
import multiprocessing
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

import numpy as np
import pytest

from profboard.server import derived, items, loading
from profboard.server.analysis.distributed import distributed
from profboard.server.analysis.overview import overview
from profboard.server.derived import derive
from profboard.server.items import ITEMS, Derivation, current_items, load_items, tag
from profboard.server.budget import Budget
from profboard.server.provider import TraceProvider
from profboard.server.sizes import held_bytes
from profboard.server.trace.entry import open_entry
from profboard.server.trace.load import store_trace
from synth import big_trace
from values import assert_identical

REPO = Path(__file__).resolve().parents[2]
TRANSFORMER = next((REPO / "tests/data/h200/bf16_transformer").glob("*.pt.trace.json.gz"))
STRAGGLER = REPO / "tests/data/h200x2/ddp_straggler_rank0"
STORED = list(ITEMS)


def stored_trace(path: Path, store: Path):
    st = path.stat()
    return store_trace(str(path), st.st_size, st.st_mtime, [str(store)])


@pytest.fixture(scope="module")
def transformer(tmp_path_factory):
    """The bf16 transformer's entry with every item stored, and the items as computed from its tables."""
    store = tmp_path_factory.mktemp("store")
    entry, tables = stored_trace(TRANSFORMER, store)
    computed = Derivation(None, lambda: tables, "worker0")
    derive(entry, tables, "worker0", lambda event: None)
    return store, entry, {name: computed.get(name) for name in STORED}



def test_every_item_of_the_catalogue_has_one_computation_taking_what_it_is_made_from():
    assert set(derived.COMPUTE) == set(ITEMS)
    for name, item in ITEMS.items():
        assert len(inspect.signature(derived.COMPUTE[name]).parameters) == 2 + len(item.needs), name
        # What an item is made from is in the catalogue, and comes before it in the loader's order.
        assert all(items.LOAD_ORDER.index(n) < items.LOAD_ORDER.index(name) for n in item.needs), name

def test_every_item_reads_back_as_computed(transformer):
    store, entry, computed = transformer
    assert current_items(entry, "worker0") == set(STORED)
    st = TRANSFORMER.stat()
    reopened, tables = store_trace(str(TRANSFORMER), st.st_size, st.st_mtime, [str(store)])
    read = Derivation(reopened, lambda: pytest.fail("an item was computed instead of read"), "worker0")
    for name in STORED:
        assert_identical(computed[name], read.get(name), name)


def test_the_stored_overview_is_the_overview_of_one_worker(transformer):
    store, entry, computed = transformer
    st = TRANSFORMER.stat()
    _, tables = store_trace(str(TRANSFORMER), st.st_size, st.st_mtime, [])
    assert computed["overview"] == overview(tables)


def test_derive_reports_ready_first_then_each_item(tmp_path):
    entry, tables = stored_trace(TRANSFORMER, tmp_path)
    events = []
    derive(entry, tables, "worker0", events.append)
    rest = [n for n in items.LOAD_ORDER if n != "views"]
    assert events[0] == ("ready", (rest[0],))
    stored = events[1:]
    assert [e[1] for e in stored] == rest and [e[4] for e in stored] == [(n,) for n in rest[1:]] + [()]
    for _, name, file, checked, _ in stored:
        assert file.startswith(f"{name}-") and entry.checked[file] == checked
    events.clear()
    derive(entry, tables, "worker0", events.append)  # everything is stored: nothing to compute
    assert events == [("ready", ())]


def test_items_computed_while_the_entry_is_written_are_stored_first_and_not_again(tmp_path):
    """store_trace's `meanwhile` gets the parsed tables while another thread writes their entry; items
    computed there from the parsed tables are what derive stores (the loader's path: loading._derive_parsed)."""
    st = TRANSFORMER.stat()
    seen = {}

    def meanwhile(parsed, written):
        derivation = Derivation(None, lambda: parsed, "worker0")
        derivation.get("overview")
        seen.update(derivation.values)
        deadline = time.monotonic() + 30
        while not written():  # the entry's writer ends, and says so
            assert time.monotonic() < deadline
            time.sleep(0.01)
    entry, tables = store_trace(str(TRANSFORMER), st.st_size, st.st_mtime, [str(tmp_path)], meanwhile=meanwhile)
    assert entry is not None and set(seen) == {"steps", "breakdown", "optree", "overview"}
    events = []
    derive(entry, tables, "worker0", events.append, computed=seen)
    early = [e[1] for e in events[1:len(seen) + 1]]
    assert sorted(early) == sorted(seen), "the computed items are stored first"
    assert early.index("overview") < early.index("optree"), "smallest first: the overview before the operator tree"
    assert events[0] == ("ready", (*early, "layout")), "requests wait for the computed items and the next one"
    assert events[len(early)][4] == ("op_instances",)
    read = Derivation(entry, lambda: pytest.fail("an item was computed instead of read"), "worker0")
    for name in early:
        assert read.get(name) is not seen[name]
        assert_identical(seen[name], read.get(name), name)
    alone = Derivation(None, lambda: tables, "worker0")
    for name in STORED:
        assert_identical(alone.get(name), read.get(name), name)


def test_an_entry_that_cannot_be_written_meanwhile_is_logged_and_none(tmp_path, monkeypatch, caplog):
    from profboard.server.trace import load

    def broken(store, key, tables):
        raise OSError("disk full")
    monkeypatch.setattr(load, "write_entry", broken)
    ran = []
    st = TRANSFORMER.stat()
    with caplog.at_level(logging.WARNING, logger="profboard"):
        entry, tables = store_trace(str(TRANSFORMER), st.st_size, st.st_mtime, [str(tmp_path)],
                                    meanwhile=lambda parsed, written: ran.append(parsed))
    assert entry is None and ran == [tables] and len(tables.events) > 0
    assert any("cannot write the store entry" in r.getMessage() and "disk full" in r.getMessage()
               for r in caplog.records)


def test_a_big_traces_loader_computes_the_later_items_from_the_stored_tables(tmp_path, monkeypatch):
    """Past the first page, a big trace's loader reads the entry's mapped tables: its parsed tables (0.75 GB
    on the 1 GB torch.compile trace) held its memory beside the layout's, taking the tree past 2.5 GB."""
    path = tmp_path / "worker0.1.pt.trace.json"
    path.write_bytes(big_trace(loading.BIG_FILE_BYTES))
    given = []
    monkeypatch.setattr(loading, "helper_count", lambda: 0)  # no helper processes in the test's process
    monkeypatch.setattr(loading, "report_to_server", lambda task, value: None)
    monkeypatch.setattr(loading, "derive", lambda entry, tables, *args, **kwargs: given.append(tables))
    st = path.stat()
    loading.load_in_worker(0, str(path), st.st_size, st.st_mtime, "worker0", [str(tmp_path / "store")],
                           st.st_size * 2, None, None)
    events = given[0].events
    assert len(events) > 50_000
    for column in ("ts", "dur", "kind"):
        owner = events[column].to_numpy()
        while isinstance(owner, np.ndarray) and owner.base is not None:
            owner = owner.base
        # Arrow arrays over the entry's mapped file; a parsed column's memory is a numpy array's own.
        assert not isinstance(owner, np.ndarray), column


def test_a_helper_computes_items_beside_the_loader(tmp_path):
    """Two lanes: each item once, each after what it is made from, the same values as computed in one
    process; the items a request must wait for are those computed and those taken next."""
    entry, tables = stored_trace(TRANSFORMER, tmp_path)
    alone = Derivation(None, lambda: tables, "worker0")
    events = []
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        derive(entry, tables, "worker0", events.append,
               helper=lambda name: pool.submit(derived.compute_stored, entry, "worker0", name))
    stored = [e[1] for e in events if e[0] == "stored"]
    assert sorted(stored) == sorted(n for n in items.LOAD_ORDER if n != "views")
    for name in stored:
        assert all(stored.index(need) < stored.index(name) for need in ITEMS[name].needs if need != "views")
    assert events[0] == ("ready", ("steps", "optree")), "both lanes start at once, each on an item with no inputs"
    assert events[-1][4] == ()
    read = Derivation(entry, lambda: pytest.fail("an item was computed instead of read"), "worker0")
    for name in stored:
        assert_identical(alone.get(name), read.get(name), name)


def test_a_helper_that_fails_leaves_its_item_to_the_loader(tmp_path, caplog):
    entry, tables = stored_trace(TRANSFORMER, tmp_path)

    def broken(name):
        future = Future()
        future.set_exception(BrokenProcessPool("a helper died"))
        return future
    events = []
    with caplog.at_level(logging.WARNING, logger="profboard"):
        derive(entry, tables, "worker0", events.append, helper=broken)
    assert current_items(entry, "worker0") == set(STORED)
    assert any("a helper could not compute" in r.getMessage() for r in caplog.records)


def test_a_small_trace_gets_at_load_only_what_lists_it_and_what_other_workers_read(tmp_path, monkeypatch):
    entry, tables = stored_trace(TRANSFORMER, tmp_path)
    assert entry.rows["events"] < items.LOAD_ALL_ROWS
    assert items.load_items(entry.rows["events"]) == ("views", "steps", "breakdown", "summary")
    derive(entry, tables, "worker0", lambda event: None, items.load_items(entry.rows["events"]))
    assert current_items(entry, "worker0") == {"views", "steps", "breakdown", "summary"}
    monkeypatch.setattr(items, "LOAD_ALL_ROWS", entry.rows["events"])
    assert items.load_items(entry.rows["events"]) == items.LOAD_ORDER


def test_a_new_version_recomputes_only_its_item_and_those_made_from_it(tmp_path, monkeypatch):
    entry, tables = stored_trace(TRANSFORMER, tmp_path)
    derive(entry, tables, "worker0", lambda event: None)
    before = {name: tag(name, "worker0") for name in STORED}
    monkeypatch.setitem(ITEMS, "optree", dataclasses.replace(ITEMS["optree"], version=ITEMS["optree"].version + 1))
    changed = {name for name in STORED if tag(name, "worker0") != before[name]}
    assert changed == {"optree", "overview", "op_instances", "compile"}
    assert current_items(entry, "worker0") == set(STORED) - changed
    events = []
    derive(entry, tables, "worker0", events.append)
    assert {e[1] for e in events if e[0] == "stored"} == changed
    names = sorted(os.listdir(entry.folder))
    assert len([n for n in names if n.startswith("optree-")]) == 1, "the stale version was not removed"


def test_the_summary_is_kept_per_worker_name(tmp_path):
    entry, tables = stored_trace(TRANSFORMER, tmp_path)
    derive(entry, tables, "worker0", lambda event: None)
    assert "summary" not in current_items(entry, "renamed")
    assert Derivation(entry, lambda: tables, "renamed").get("summary").identity["worker"] == "renamed"


def test_a_damaged_item_is_removed_and_computed_again(tmp_path, caplog):
    entry, tables = stored_trace(TRANSFORMER, tmp_path)
    derive(entry, tables, "worker0", lambda event: None)
    good = Derivation(None, lambda: tables, "worker0").get("layout")  # not a view on the file damaged below
    (file,) = [n for n in os.listdir(entry.folder) if n.startswith("layout-")]
    path = Path(entry.folder) / file
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    entry.checked.clear()  # a fresh process: the file is checked when first read
    with caplog.at_level(logging.WARNING, logger="profboard"):
        again = Derivation(entry, lambda: tables, "worker0").get("layout")
    assert any("layout" in r.getMessage() and "damaged" in r.getMessage() for r in caplog.records)
    assert_identical(good, again)
    entry.checked.clear()
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="profboard"):  # stored again, whole
        assert_identical(good, Derivation(entry, lambda: pytest.fail("computed again"), "worker0").get("layout"))
    assert not caplog.records


def provider_of(path: Path, store: Path, budget: Budget, reload=lambda: None) -> TraceProvider:
    entry, _ = stored_trace(path, store)
    return TraceProvider(entry, "worker0", budget, reload)


def test_a_request_waits_for_the_item_the_loader_is_computing(tmp_path):
    entry, tables = stored_trace(TRANSFORMER, tmp_path)
    provider = TraceProvider(entry, "worker0", Budget(1 << 30), lambda: None)
    provider.loader_started(("steps", "breakdown"))
    got = []
    asker = threading.Thread(target=lambda: got.append(provider.steps()))
    asker.start()
    time.sleep(0.3)
    assert not got, "the request computed the item the loader was computing"
    loader = Derivation(entry, lambda: tables, "worker0")  # the loader, in another process
    loader.get("steps")
    file = loader.written["steps"]
    provider.loader_stored("steps", file, entry.checked[file], ("breakdown",))
    asker.join(5)
    assert_identical(got[0], loader.values["steps"])
    # The loader named the item it takes next as it stored this one: a request for it waits too, with no
    # moment between the two in which it would compute it a second time.
    asker = threading.Thread(target=lambda: got.append(provider._derivation.get("breakdown")))
    asker.start()
    time.sleep(0.3)
    assert len(got) == 1, "the request computed the item the loader computes next"
    loader.get("breakdown")
    file = loader.written["breakdown"]
    provider.loader_stored("breakdown", file, entry.checked[file], ())
    asker.join(5)
    assert_identical(got[1], loader.values["breakdown"])


def test_an_item_the_loader_has_not_reached_is_computed_and_stored_here(tmp_path):
    entry, tables = stored_trace(TRANSFORMER, tmp_path)
    provider = TraceProvider(entry, "worker0", Budget(1 << 30), lambda: None)
    provider.loader_started(("steps", "breakdown"))
    provider.layout()
    assert "layout" in current_items(entry, "worker0")


def test_the_budget_drops_the_least_recently_used_never_one_in_use(tmp_path):
    budget = Budget(1 << 40)
    a, b, c = (provider_of(TRANSFORMER, tmp_path / name, budget) for name in "abc")
    for p in (a, b, c):
        with p.use():
            p.tables()
            p.layout()
    held = {p: p.held for p in (a, b, c)}
    assert all(held.values())
    budget.limit = held[b] + held[c]  # room for two
    with a.use():  # a is used again: b is now the least recent
        with c.use():
            a.memo(("answer",), lambda: list(range(1000)))
    assert b.held == 0 and a.held > 0 and c.held > 0
    budget.limit = 0
    with a.use():
        a.memo(("another",), lambda: [0])
        assert a.held > 0, "a provider serving a request let go of its data"
    assert c.held == 0
    with b.use():  # dropped data comes back from the store
        assert len(b.tables().events) and b.layout() is not None


def test_held_bytes_count_what_is_not_mapped(tmp_path):
    entry, tables = stored_trace(TRANSFORMER, tmp_path)
    mapped = entry.tables()
    categories = sum(int(c.cat.categories.memory_usage(deep=True)) for frame in
                     (mapped.events, mapped.memory, mapped.flows, mapped.counters)
                     for _, c in frame.items() if c.dtype == "category")
    # Numeric columns and codes are views on the file: the tables hold their categories, metadata and warnings.
    assert held_bytes(mapped) == (categories + sys.getsizeof(mapped) + held_bytes(mapped.metadata)
                                  + held_bytes(mapped.warnings))
    numeric = sum(c.to_numpy().nbytes for _, c in tables.events.items() if c.dtype != "category")
    assert held_bytes(tables) > categories + numeric  # parsed here: every column


def test_a_damaged_table_of_a_served_trace_is_loaded_again(tmp_path, start_app):
    logdir, store = tmp_path / "logdir", tmp_path / "store"
    (logdir / "run").mkdir(parents=True)
    shutil.copyfile(TRANSFORMER, logdir / "run" / TRANSFORMER.name)
    first = start_app(logdir, expect=["run"], cache_dir=store)
    clean = first.get("/api/operators", {"run": "run"}).json()
    f = next(p for p in store.iterdir() if not p.name.startswith("."))
    worker = first.runs()["run"]["workers"][0]
    entry = open_entry(str(store), f.name)
    # The loader stores its last items after the trace is ready (a small trace's: load_items).
    deadline = time.monotonic() + 60
    while not set(load_items(entry.rows["events"])) <= current_items(entry, worker) and time.monotonic() < deadline:
        time.sleep(0.1)
    first.stop()
    data = bytearray((f / "events.arrow").read_bytes())
    data[len(data) // 2] ^= 0xFF
    (f / "events.arrow").write_bytes(bytes(data))
    again = start_app(logdir, expect=["run"], cache_dir=store)
    try:
        assert again.runs()["run"]["status"] == "ready"  # opened from the store: tables checked when mapped
        answer = again.get("/api/operators", {"run": "run"})
        assert answer.status_code == 409 and "damaged" in answer.json()["error"]["message"]
        again.wait_until_loaded(["run"])
        assert again.get("/api/operators", {"run": "run"}).json() == clean
        assert "parsing the trace again" in again.log()
    finally:
        again.stop()


def test_the_overview_adds_the_findings_across_ranks_from_stored_summaries(tmp_path, start_app):
    shutil.copytree(STRAGGLER, tmp_path / "logdir" / "run")
    app = start_app(tmp_path / "logdir", expect=["run"], cache_dir=tmp_path / "store")
    tables = {}
    for path in sorted((tmp_path / "logdir" / "run").iterdir()):
        st = path.stat()
        tables[path.name.split(".")[0]] = store_trace(str(path), st.st_size, st.st_mtime, [])[1]
    assert sorted(app.runs()["run"]["workers"]) == sorted(tables)
    view = distributed(tables)
    for worker in tables:
        answer = app.get("/api/overview", {"run": "run", "worker": worker}).json()
        expected = overview(tables[worker], distributed_of=lambda: view, worker=worker)
        assert answer["recommendations"] == expected["recommendations"]
        assert "straggler" in {f["id"] for f in answer["recommendations"]}
    app.stop()


def test_the_private_store_lives_while_the_server_runs(tmp_path, start_app):
    (tmp_path / "logdir" / "run").mkdir(parents=True)
    shutil.copyfile(TRANSFORMER, tmp_path / "logdir" / "run" / TRANSFORMER.name)
    dead = Path(tempfile.gettempdir()) / "profboard-store-999999999-x"  # a killed server's (no such pid)
    dead.mkdir(exist_ok=True)
    app = start_app(tmp_path / "logdir", expect=["run"])  # no store folder: a private one
    scratch = Path(app.app.state.store._scratch)
    assert scratch.name.startswith(f"profboard-store-{os.getpid()}-") and any(scratch.iterdir())
    assert not dead.exists()
    app.stop()
    assert not scratch.exists()


def test_the_loader_skips_what_another_process_computes(tmp_path):
    entry, tables = stored_trace(TRANSFORMER, tmp_path)
    server = Derivation(entry, lambda: tables, "worker0")
    with entry.computing("layout"):  # the server computes the layout while the loader runs
        assert entry.claimed("layout")
        events = []
        derive(entry, tables, "worker0", events.append)
        server.get("layout")
    skipped = {"layout", "blocks", "flows"}  # the layout and what is made from it
    assert {e[1] for e in events if e[0] == "stored"} == set(ITEMS) - {"views"} - skipped
    assert not entry.claimed("layout") and "layout" in current_items(entry, "worker0")
    assert not any(name.endswith(".computing") for name in os.listdir(entry.folder))


def test_a_request_waits_for_an_item_the_loader_reaches_while_it_waits_for_what_it_is_made_from(tmp_path):
    entry, tables = stored_trace(TRANSFORMER, tmp_path)
    provider = TraceProvider(entry, "worker0", Budget(1 << 30), lambda: None)
    provider.loader_started(("steps", "breakdown"))
    got = []
    asker = threading.Thread(target=lambda: got.append(provider._derivation.get("breakdown")))  # made from steps
    asker.start()
    loader = Derivation(entry, lambda: tables, "worker0")
    for name, following in (("steps", ("breakdown",)), ("breakdown", ())):
        time.sleep(0.3)
        assert not got, f"the request computed what the loader computes ({name})"
        loader.get(name)
        file = loader.written[name]
        provider.loader_stored(name, file, entry.checked[file], following)
    asker.join(5)
    assert_identical(got[0], loader.values["breakdown"])


def test_an_idle_trace_lets_its_mapped_pages_go(tmp_path):
    entry, _ = stored_trace(TRANSFORMER, tmp_path)
    provider = TraceProvider(entry, "worker0", Budget(1 << 30), lambda: None)

    def mapped_kb() -> int:  # resident pages of the entry's files in this process
        total, inside = 0, False
        for line in Path("/proc/self/smaps").read_text().splitlines():
            if line[0] in "0123456789abcdef" and "-" in line.split()[0]:
                inside = entry.folder in line
            elif inside and line.startswith("Rss:"):
                total += int(line.split()[1])
        return total
    with provider.use():
        provider.tables().events["ts"].to_numpy().sum()  # reads a column: its pages map in
        provider.layout().start.sum()
        assert mapped_kb() > 0
        provider.release_if_idle(idle_s=0.0)
        assert mapped_kb() > 0, "pages of a trace in use were let go"
    provider.release_if_idle(idle_s=60.0)
    assert mapped_kb() > 0, "pages of a trace used a moment ago were let go"
    provider.release_if_idle(idle_s=0.0)
    assert mapped_kb() == 0
    with provider.use():  # and they come back when read
        assert provider.tables().events["ts"].to_numpy().sum() > 0 and mapped_kb() > 0


def test_a_request_waits_for_the_item_the_loader_computes_next(tmp_path):
    entry, tables = stored_trace(TRANSFORMER, tmp_path)
    provider = TraceProvider(entry, "worker0", Budget(1 << 30), lambda: None)
    at = items.LOAD_ORDER.index("layout") - 1
    provider.loader_started((items.LOAD_ORDER[at], "layout"))  # the loader's item just before the layout, and it
    got = []
    asker = threading.Thread(target=lambda: got.append(provider.layout()))
    asker.start()
    time.sleep(0.3)
    assert not got and not entry.claimed("layout"), "the request computed the layout, which the loader computes next"
    loader = Derivation(entry, lambda: tables, "worker0")
    loader.get("layout")
    file = loader.written["layout"]
    provider.loader_stored(items.LOAD_ORDER[at], None, None, ("layout",))
    provider.loader_stored("layout", file, entry.checked[file], ())
    asker.join(5)
    assert_identical(got[0], loader.values["layout"])


@pytest.mark.parametrize("end_first", [True, False])
def test_a_loads_news_taken_after_its_end_leaves_nobody_waiting(tmp_path, end_first):
    """The loader's news (server/store.py _drain_progress) and the load's end (the pool's callback) come
    from two threads: news taken after the end must not mark the trace as waiting for its loader."""
    from profboard.server.logdir import TraceFile
    from profboard.server.settings import Settings
    from profboard.server.store import FileState, TraceStore

    entry, _ = stored_trace(TRANSFORMER, tmp_path / "store")
    st = TRANSFORMER.stat()
    fs = FileState(TraceFile(str(TRANSFORMER), st.st_size, st.st_mtime, "worker0", None))
    store = TraceStore(Settings(logdir=str(tmp_path), cache_dir=str(tmp_path / "store")))
    try:
        store._tasks[7] = fs
        ended: Future = Future()
        ended.set_result(entry)
        news = ("ready", entry, ("steps", "breakdown"))
        if end_first:
            store._finish(7, ended)
            store._loader_event(7, fs, news)
        else:
            store._loader_event(7, fs, news)
            assert fs.provider._loader_active  # under way: requests for its items wait for it
            store._finish(7, ended)
        assert fs.status == "ready" and not fs.provider._loader_active
    finally:
        store.close()
