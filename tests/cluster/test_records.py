"""Cluster mode's own records and options: the manifest's ``extensions["ray"]`` and ``RunOptions.backend_options``.

The core manifest keeps a plug-in's record verbatim; these tests check that cluster mode
reads its own back, writes it where ``trialgrid job status`` finds it, and refuses a damaged one or a misspelt
option in one located line. None of them starts Ray.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from cluster.options import RayOptions
from cluster.records import RaySessionRecord, WatchRecord, WorkerWatch, put_ray_record, ray_record
from cluster.watch import Watch, output_summary
from runner.core.errors import UserError
from runner.core.manifest import MANIFEST, read_manifest, read_manifest_file, write_manifest
from tests.helpers.messages import heard

RAY_RUN = Path(__file__).resolve().parents[1] / "core" / "fixtures" / "manifest-run-ray.json"


def test_a_ray_manifest_reads_through_the_plugins_records(tmp_path: Path) -> None:
    written = json.loads(RAY_RUN.read_text())["sessions"][0]["extensions"]["ray"]
    record = ray_record(read_manifest_file(RAY_RUN).sessions[0])
    assert record is not None and record.address == written["address"] == "local"
    assert record.watch is not None and record.watch.done == written["watch"]["done"]
    assert [w.model_dump() for w in record.watch.workers] == written["watch"]["workers"]
    shutil.copy(RAY_RUN, tmp_path / MANIFEST)
    summary = output_summary(tmp_path)  # what `trialgrid job status JOB` prints below the job's state
    assert "complete (its last of 1 session)" in summary and "w0:49/s w1:52/s" in summary, summary


def test_the_watch_is_published_into_the_sessions_ray_record(tmp_path: Path) -> None:
    manifest = read_manifest_file(RAY_RUN)
    session = manifest.sessions[0]
    put_ray_record(session, RaySessionRecord(address="HEAD:6379"))
    assert session.extensions["ray"] == {"address": "HEAD:6379"}  # no watch yet: none written, not a null
    watch = Watch(total=10, already_done=4)
    watch.record = WatchRecord(at="2026-01-01T00:00:00Z", done=7, total=10, trials_per_s=3.0,
                               workers=[WorkerWatch(index=0, trials=3, trials_per_s=3.0, in_flight=1, limiter_waits=0)])
    with heard() as said:
        watch.publish(manifest, lambda: write_manifest(tmp_path, manifest))
    again = read_manifest(tmp_path)
    assert again is not None
    record = ray_record(again.sessions[0])
    assert record == RaySessionRecord(address="HEAD:6379", watch=watch.record)  # the address is kept
    assert said == ["ray: 7/10 trials; 3 trials/s; workers w0:3/s; 1 in flight; 0 limiter waits; "
                    "0 chunks re-queued (0 workers replaced)"]
    assert ray_record(read_manifest_file(Path(__file__).parents[1] / "core" / "fixtures" / "manifest-run.json")
                      .sessions[0]) is None  # a single-node session has no Ray record


def test_a_damaged_ray_record_is_one_located_line() -> None:
    session = read_manifest_file(RAY_RUN).sessions[0]
    session.extensions = {"ray": {"address": "local", "watch": {"done": "many"}}}
    with pytest.raises(UserError) as info:
        ray_record(session, index=0, file=Path("out/manifest.json"))
    message = str(info.value)
    assert "\n" not in message and message.startswith("out/manifest.json sessions[0].extensions.ray.watch.")
    assert "damaged run manifest" in message


def test_the_ray_backend_reads_its_own_options() -> None:
    assert RayOptions.of({}) == RayOptions(address="auto", workers=None)
    assert RayOptions.of({"address": "local", "workers": 3}).workers == 3
    with pytest.raises(UserError, match=r"Ray backend option 'adress'.*takes address, workers"):
        RayOptions.of({"adress": "local"})
    with pytest.raises(UserError, match="'workers'"):
        RayOptions.of({"workers": 0})
