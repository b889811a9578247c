"""Scale on real outputs: run, resume, report, a ``runner.load`` query and diff, at 1M (or more) real trials.

Usage: python benchmarks/scale.py [--trials 1000000] [--cache DIR] [--steps run,resume,kill,report,load,diff]

The outputs are real: the quickstart sweep (3 simulated agents × 13 triples × 3 conditions, ``provider: sim``)
with its run count scaled to ``--trials``, written through the engine with every common column (``trial_id``,
``tool_calls``, ``response_text``, the recorded calls). The complete output is a fixture cached under
``--cache`` (default ``$TMPDIR/trialgrid-scale``), keyed by the trial count and the sweep's id, so it is built
once; delete the directory to rebuild it. Each step runs in a fresh Python process, which prints its wall
time, CPU time and peak RSS (``VmHWM``, which starts afresh in each process), so no step's memory counts
against another:

- ``run``: the build itself (only when the fixture is missing; else its cached figures, marked so);
- ``resume``: ``run`` again on the complete output (nothing to do), in a scratch copy whose parts are hard links
  to the fixture's (a resume records its session in the manifest: the fixture is never written);
- ``kill``: a run of the same sweep into a scratch output, killed (SIGKILL) at half the build's wall time,
  then resumed: the time to the resume's first new trial and the whole resume, and a check that the output
  holds every trial once (rows = distinct ids = trials). With ``--cut`` (for big grids, where a second build
  takes as long as the first), the scratch output is instead the fixture as a kill at 50% leaves it: the parts
  before the half hard-linked, the part the half falls in as an open stream part holding its batches up to
  the half (to be repaired, as after a real kill), the session left ``running``; the resume is timed to its
  first new trial and stopped there;
- ``report``: ``trialgrid report OUT --json FILE -q``;
- ``load``: ``runner.load(OUT)`` with a per-cell query (decoy rate per model × condition) collected;
- ``diff``: ``trialgrid diff OUT OUT``.

Figures drift with the machine's load (printed with them); compare steps of one run, side by side.

Figures: docs/performance.md (one current table; quote them with the load average).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from engine_inprocess import scaled_sweep  # the quickstart scaled to N trials, as the engine benchmark runs it

STEPS = ("run", "resume", "kill", "report", "load", "diff")


# -- one step, in its own process -------------------------------------------------------------------------------------

def _peak_rss_mib() -> float:
    """This process's own peak RSS: ``VmHWM``, which starts afresh at ``exec``. (``ru_maxrss`` does not: a child
    forked from a big parent reports the parent's high-water mark as its own.)"""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)  # no /proc: the best there is


def _figures(started: float, cpu: float, **extra: object) -> dict[str, object]:
    return {"wall_s": round(time.perf_counter() - started, 3), "cpu_s": round(time.process_time() - cpu, 3),
            "peak_rss_mib": _peak_rss_mib(), **extra}


def _time_opening() -> dict[str, float]:
    """Seconds of the two costs of opening an output, summed into the returned dict as they happen: ``verify_s``,
    checking the parts' checksums (``runner.output.parts.verify_part``), and ``repair_s``, finalizing the parts a
    kill left open (``repair_parts``, called by the session): told apart from the resume's own work."""
    import runner.execution.session as session_module
    import runner.output.parts as parts_module

    spent = {"verify_s": 0.0, "repair_s": 0.0}
    for module, name, key in ((parts_module, "verify_part", "verify_s"), (session_module, "repair_parts", "repair_s")):
        inner = getattr(module, name, None)
        if inner is None:
            continue

        def timed(*args: object, _inner: Any = inner, _key: str = key, **kwargs: object) -> object:
            t = time.perf_counter()
            try:
                return _inner(*args, **kwargs)
            finally:
                spent[_key] += time.perf_counter() - t

        setattr(module, name, timed)
    return spent


def _step(name: str, sweep: Path, out: Path) -> dict[str, object]:
    started, cpu = time.perf_counter(), time.process_time()
    if name in ("run", "resume"):
        import runner
        import runner.output.sink as sink_module
        from runner.config.sweep import load_sweep

        first: list[float] = []
        append = sink_module.TrialSink.append
        stop_at_first = os.environ.get("SCALE_STOP_AT_FIRST") == "1"
        opening = _time_opening()

        def timed_append(self: object, row: object) -> None:  # when the first new trial reaches the writer
            if not first:
                first.append(time.perf_counter() - started)
                if stop_at_first:
                    print(json.dumps(_figures(started, cpu, first_new_trial_s=round(first[0], 3),
                                              **{k: round(v, 3) for k, v in opening.items()})), flush=True)
                    os._exit(0)
            append(self, row)  # type: ignore[arg-type]

        sink_module.TrialSink.append = timed_append  # type: ignore[method-assign]
        result = runner.run(load_sweep(sweep), out, quiet=True)
        return _figures(started, cpu, trials=sum(result.counts.values()), skipped=result.skipped,
                        run=result.stats.done, first_new_trial_s=round(first[0], 3) if first else None,
                        **{k: round(v, 3) for k, v in opening.items()})
    if name == "load":
        import polars as pl

        import runner

        table = (runner.load(out).group_by("model", "condition")
                 .agg(pl.len().alias("trials"), pl.col("decoy_called").mean().alias("decoy")).collect())
        return _figures(started, cpu, cells=table.height)
    if name == "check":  # every trial once (not timed as a step)
        import polars as pl

        frame = pl.scan_ipc(str(out / "trials" / "*.arrow"))
        counts = frame.select(pl.len().alias("rows"), pl.col("trial_id").n_unique().alias("ids")).collect()
        return {"rows": int(counts["rows"][0]), "distinct_ids": int(counts["ids"][0])}
    raise SystemExit(f"unknown step {name!r}")


# -- the driver -------------------------------------------------------------------------------------------------------

def _in_child(step: str, sweep: Path, out: Path, *, stop_at_first: bool = False) -> dict[str, object]:
    env = {**os.environ, "SCALE_STOP_AT_FIRST": "1" if stop_at_first else "0"}
    done = subprocess.run([sys.executable, __file__, "--step", step, "--sweep", str(sweep), "--out", str(out)],
                          capture_output=True, text=True, check=True, env=env)
    return json.loads(done.stdout.strip().splitlines()[-1])


def fresh_cli(args: list[str]) -> dict[str, object]:
    """A ``trialgrid`` command in a fresh process: wall, CPU (user + sys of the child), peak RSS and its exit code
    (``exit``, with ``stderr`` when it is not 0)."""
    # the child says its own peak (VmHWM) as its last line on stderr: wait4's ru_maxrss would include this parent's
    code = ("import sys; from runner.cli import main; sys.argv = ['trialgrid', *sys.argv[1:]]\n"
            "code = 0\n"
            "try:\n    main()\nexcept SystemExit as exc:\n    code = exc.code if isinstance(exc.code, int) else 1\n"
            "peak = [ln.split()[1] for ln in open('/proc/self/status') if ln.startswith('VmHWM:')]\n"
            "print('VmHWM', peak[0] if peak else -1, file=sys.stderr)\n"
            "sys.exit(code)\n")
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    said = proc.stderr.read().decode(errors="replace").splitlines()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    peak = next((int(ln.split()[1]) for ln in reversed(said) if ln.startswith("VmHWM ")), -1)
    code = os.waitstatus_to_exitcode(status)
    return {"wall_s": round(wall, 3), "cpu_s": round(usage.ru_utime + usage.ru_stime, 3),
            "peak_rss_mib": round(peak / 1024, 1) if peak >= 0 else round(usage.ru_maxrss / 1024, 1),
            "exit": code, **({"stderr": "\n".join(said)} if code else {})}


def _fixture(cache: Path, trials: int) -> tuple[Path, Path, dict[str, object]]:
    """The cached complete output (built on first use) and the build's figures."""
    folder = cache / f"quickstart-{trials}"
    out = folder / "out"
    record = folder / "build.json"
    if record.exists() and (out / "manifest.json").exists():
        # the sweep the fixture was built from, as its manifest records it, in a file of this benchmark's own (the
        # fixture's sweep.yaml is left alone: another checkout's run may have rewritten its case paths)
        import yaml

        scratch = cache / f"scratch-{trials}-sweep"
        scratch.mkdir(exist_ok=True)
        sweep = scaled_sweep(scratch, trials)
        data = yaml.safe_load(sweep.read_text())
        built = json.loads((out / "manifest.json").read_text())["sweep"]["probes"]
        for probe, recorded in zip(data["probes"], built, strict=True):
            probe.update(cases=recorded["cases"], catalogue=recorded["catalogue"])
        sweep.write_text(yaml.safe_dump(data))
        return sweep, out, {**json.loads(record.read_text()), "cached": True}
    if (out / "manifest.json").exists():  # an output without its build record: being built, or a build cut short
        raise SystemExit(f"{out} has no {record.name} (still being built?): wait for it, or delete {folder} to "
                         "rebuild it")
    folder.mkdir(parents=True, exist_ok=True)
    sweep = scaled_sweep(folder, trials)
    shutil.rmtree(out, ignore_errors=True)
    figures = _in_child("run", sweep, out)
    record.write_text(json.dumps(figures))
    return sweep, out, figures


def _linked_copy(out: Path, dest: Path) -> Path:
    """A scratch output equal to ``out``: its parts hard-linked (no bytes copied), its manifest copied, so a step
    that writes (a resume records its session) never writes into the cached fixture. Nothing rewrites a part in
    place: a repair renames or moves, which leaves the fixture's link alone."""
    shutil.rmtree(dest, ignore_errors=True)
    (dest / "trials").mkdir(parents=True)
    for part in sorted((out / "trials").glob("*.arrow")):
        os.link(part, dest / "trials" / part.name)
    for name in ("manifest.json", "batches.json"):
        if (out / name).exists():
            shutil.copy2(out / name, dest / name)
    return dest


def _kill_and_resume(sweep: Path, scratch: Path, build_wall: float) -> dict[str, object]:
    shutil.rmtree(scratch, ignore_errors=True)
    code = ("from pathlib import Path; import sys; from runner.config.sweep import load_sweep; "
            "import runner; runner.run(load_sweep(Path(sys.argv[1])), Path(sys.argv[2]), "
            "quiet=True)")
    proc = subprocess.Popen([sys.executable, "-c", code, str(sweep), str(scratch)])
    time.sleep(build_wall / 2)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = _in_child("check", sweep, scratch) if any((scratch / "trials").glob("*.arrow")) else {"rows": 0}
    resumed = _in_child("run", sweep, scratch)
    after = _in_child("check", sweep, scratch)
    return {"rows_at_kill_finalized": before["rows"], **resumed, "exactly_once": after}


def _cut_and_resume(sweep: Path, out: Path, scratch: Path) -> dict[str, object]:
    """The fixture as a kill at 50% leaves it, resumed to its first new trial.

    Parts wholly inside the first half are hard links to the fixture's (finalized parts, as the run left them);
    the part the half falls in becomes an open stream part (``part-*.arrows``: its batches up to the half, each
    with its checksum metadata, no footer, no seal), which the resume must repair first, as after a real kill;
    the session is left ``running``. Nothing is written into the fixture."""
    import pyarrow as pa
    import pyarrow.ipc as ipc

    shutil.rmtree(scratch, ignore_errors=True)
    (scratch / "trials").mkdir(parents=True)
    manifest = json.loads((out / "manifest.json").read_text())
    for session in manifest["sessions"]:
        session.update(status="running", finished_at=None, trials_run=0)
    manifest["status"] = "running"
    (scratch / "manifest.json").write_text(json.dumps(manifest))
    half = int(manifest["trials_total"]) // 2
    rows = streamed = 0
    for part in sorted((out / "trials").glob("*.arrow")):
        if rows >= half:
            break
        with pa.memory_map(str(part)) as source:
            reader = ipc.open_file(source)
            part_rows = sum(reader.get_batch(i).num_rows for i in range(reader.num_record_batches))
            if rows + part_rows <= half:
                os.link(part, scratch / "trials" / part.name)
                rows += part_rows
                continue
            with pa.OSFile(str(scratch / "trials" / (part.stem + ".arrows")), "wb") as sink, \
                    ipc.new_stream(sink, reader.schema) as writer:
                for i in range(reader.num_record_batches):
                    if rows >= half:
                        break
                    batch, metadata = reader.get_batch_with_custom_metadata(i)
                    if batch.num_rows == 0:
                        continue  # the seal: an open part has none yet
                    writer.write_batch(batch, custom_metadata=metadata)
                    rows += batch.num_rows
                    streamed += batch.num_rows
    return {"rows_kept": rows, "rows_in_open_part": streamed,
            **_in_child("run", sweep, scratch, stop_at_first=True)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=1_000_000)
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "trialgrid-scale")
    parser.add_argument("--steps", default=",".join(STEPS))
    parser.add_argument("--cut", action="store_true", help="kill step: cut the fixture at 50%% instead of a 2nd run")
    parser.add_argument("--step", help=argparse.SUPPRESS)
    parser.add_argument("--sweep", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.step:  # a child: one step, its figures as the last line
        print(json.dumps(_step(args.step, args.sweep, args.out)))
        return
    steps = [s for s in args.steps.split(",") if s]
    print(f"load average {os.getloadavg()[0]:.1f}, {os.cpu_count()} CPUs; cache {args.cache}", flush=True)
    sweep, out, build = _fixture(args.cache, args.trials)

    def show(name: str, figures: dict[str, object]) -> None:  # as each step ends: a long run shows what it has
        print(f"{name:12s} " + "  ".join(f"{k} {v}" for k, v in figures.items())
              + f"  (load {os.getloadavg()[0]:.1f})", flush=True)

    show("run", build)
    if "resume" in steps:
        show("resume", _in_child("run", sweep, _linked_copy(out, args.cache / f"scratch-{args.trials}")))
    if "kill" in steps and args.cut:
        show("cut+resume", _cut_and_resume(sweep, out, args.cache / f"scratch-{args.trials}"))
    elif "kill" in steps:
        show("kill+resume", _kill_and_resume(sweep, args.cache / f"scratch-{args.trials}",
                                             float(build["wall_s"])))  # type: ignore[arg-type]
    if "report" in steps:
        show("report", fresh_cli(["report", str(out), "--json", str(args.cache / "report.json"), "-q"]))
    if "load" in steps:
        show("load", _in_child("load", sweep, out))
    if "diff" in steps:
        show("diff", fresh_cli(["diff", str(out), str(out)]))

if __name__ == "__main__":
    main()
