"""Whether a run's numbers are of the whole grid: every report of one that is not says so, with counts, first.

A budget stop, a crash or Ctrl-C leaves a grid part-written. Its rates are rates of the trials that ran, and
a verdict on them (the scorecard) would grade prompts the rest of the grid would change, so every renderer
leads with ``incomplete_lines`` and the scorecard grades no unfinished run.

A model server that died mid-run (a local llama.cpp that crashed, a tunnel that closed) leaves a finished grid
whose later trials are all error rows that never reached a server. Its tables then hold the trials before the
crash, and a reader who starts at the first table sees rates of a fraction of the grid with no word of why
("a crashed server was reported after 180 lines of empty tables"). So the same lines say that
first, counted from the rows' ``unreachable`` column (``runner.config.cost.usage_by_model``). Likewise a server
whose tool-call parser dropped what the model wrote (empty replies it billed tokens for: the replies view's
``server finding`` notes) makes those trials measure the server, not the model: said first too.
"""

from __future__ import annotations

from runner.analysis.leaderboard import Summary
from runner.analysis.replies import SERVER_FINDING


def incomplete_runs(summary: Summary) -> list[tuple[str, int, int]]:
    """(run, trials written, trials in its grid) of every run whose grid is not finished; an import, whose
    manifest counts no grid, is never incomplete."""
    return [(r["run"], r["trials"], r["trials_total"]) for r in summary.run_table.iter_rows(named=True)
            if r["trials_total"] and r["trials"] < r["trials_total"]]


#: a model's server is called lost when at least this share of its trials never reached it (a blip that a few
#: retries gave up on stays in the error counts; a dead server takes every trial after it died)
LOST_SERVER_SHARE = 0.10


def lost_servers(summary: Summary) -> list[tuple[str, str, int, int]]:
    """(run, model, unreachable trials, trials) of every model whose server could not be reached in at least
    ``LOST_SERVER_SHARE`` of its trials."""
    models = summary.models
    if "unreachable" not in models.columns:  # a Summary built by hand, without usage
        return []
    return [(r["run"], r["model"], r["unreachable"], r["trials"]) for r in models.iter_rows(named=True)
            if r["trials"] and r["unreachable"] and r["unreachable"] >= LOST_SERVER_SHARE * r["trials"]]


def incomplete_lines(summary: Summary) -> list[str]:
    """The lines every report leads with, above its first table: one per model whose server was lost
    (``server lost: …``), one per server finding of a replies view (``server finding: …``), one per kind of part
    a rerun moved aside (``set aside: …``), then one per unfinished run (``incomplete: 417 of 540 trials
    written …``, or for a try of a few trials, ``a try (--limit 5): 5 of 540 trials written …``)."""
    many = len(summary.runs) > 1
    lines = []
    for run, model, lost, trials in lost_servers(summary):
        answered = trials - lost
        where = f" (run {run})" if many else ""
        if answered:
            lines.append(f"server lost: model {model}{where} could not reach its server in {lost:,} of {trials:,} "
                         f"trials — its rates cover the other {answered:,}; restart the server, then run the sweep "
                         "again with --retry-errors")
        else:
            lines.append(f"server unreachable: model {model}{where} reached no server in any of its {trials:,} "
                         "trials — it has no rates; start the server its base_url names, then run the sweep again "
                         "with --retry-errors")
    for analysed in summary.runs:  # the replies view's server findings (runner.analysis.replies.server_findings)
        for views in analysed.views.values():
            lines += [note + (f" (run {analysed.label})" if many else "") for view in views if view.key == "replies"
                      for note in view.notes if note.startswith(SERVER_FINDING)]
    for analysed in summary.runs:  # what a rerun moved out of the trials (runner.output.parts.quarantine_parts)
        aside = analysed.output.set_aside()
        where = f" (run {analysed.label})" if many else ""
        if aside.get("damaged"):
            lines.append(f"set aside: {_files(aside['damaged'])} that did not read whole (a torn end or a failed "
                         f"checksum){where}, in trials/damaged/ — a rerun kept every verified batch and ran the other "
                         "trials again, so the rates read none of it; delete the folder once you no longer need it")
        if aside.get("foreign"):
            lines.append(f"set aside: {_files(aside['foreign'])} of another sweep{where}, in trials/foreign/ — "
                         "not counted; move them back only into an output of that sweep")
    picks = {analysed.label: analysed.manifest.sessions[-1].picks for analysed in summary.runs
             if analysed.manifest.sessions}
    for run, done, total in incomplete_runs(summary):
        where = f" (run {run})" if many else ""
        tried = picks.get(run)
        if tried:  # rerunning a try's command would run another few trials, never the grid
            lines.append(f"a try ({' '.join(tried)}): {done:,} of {total:,} trials written{where} — rates cover only "
                         "these trials, and the scorecard is not graded; run the sweep without "
                         f"{' and '.join(sorted({flag.split()[0] for flag in tried}))} for the whole grid")
        else:
            lines.append(f"incomplete: {done:,} of {total:,} trials written{where} — rates cover only the trials "
                         "that ran, and the scorecard is not graded; rerun the same command to finish the grid")
    return lines


def _files(n: int) -> str:
    return f"{n:,} part file" + ("s" if n != 1 else "")
