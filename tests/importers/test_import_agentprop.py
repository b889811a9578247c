"""``trialgrid import agentprop`` on small hand-written CSVs in the released format (never ../shared)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from rich.console import Console
from typer.testing import CliRunner

from runner.cli.app import app
from runner.core.errors import UserError
from runner.importers.agentprop import import_agentprop
from runner.probes.judge.report import kappas, rater_table
from runner.probes.propagation.report import _rows, fabrication, hop_rates, interceptor_effect
from runner.reporting.terminal import print_report

INTERCEPTOR_HEADER = ("session_id,task_id,model,domain,condition,final_answer,abstained,abstain_reason,flag_count,"
                      "final_correct,hallucination,cost,steps\n")
P2_HEADER = ("session_id,task_id,model,domain,difficulty,source,error_type,tool_selected,tool_correct,final_correct,eps,"
             "weps,reached_output,cascade_count,cost,final_answer,ground_truth,query,gpt4o_verdict,"
             "gemini_25_flash_verdict,gpt4o_mini_verdict,ensemble_correct,heuristic_correct\n")
JUDGE_HEADER = ("session_id,task_id,model,injection_type,heuristic_correct,gpt4o_verdict,gemini_25_flash_verdict,"
                "gpt4o_mini_verdict,majority,unanimous_yes,unanimous_no,candidate,reference\n")

# (task, control hallucination, interceptor hallucination, interceptor abstained)
PAIRS = [("t1", True, False, True), ("t2", True, False, True), ("t3", True, True, False), ("t4", False, False, False),
         ("t5", True, False, False), ("t6", False, False, False)]


@pytest.fixture
def anchors(tmp_path: Path) -> Path:
    d = tmp_path / "agentprop"
    d.mkdir()
    ctrl, held = [INTERCEPTOR_HEADER], [INTERCEPTOR_HEADER]
    for task, hc, hi, ab in PAIRS:
        ctrl.append(f"ctrl_m_{task},{task},m,weather,no_interceptor,\"It was 20, sunny\",False,,0,{not hc},{hc},1e-05,2\n")
        held.append(f"int_m_{task},{task},m,weather,early_interceptor,ok,{ab},{'flag' if ab else ''},{int(ab)},"
                    f"{not hi and not ab},{hi},1e-05,3\n")
    (d / "interceptor_control_600.csv").write_text("".join(ctrl))
    (d / "interceptor_heldout_600.csv").write_text("".join(held))
    p2 = [P2_HEADER]
    # model a: 4 traces reach S2 (eps 2), 3 of them wrong; model b never calls a tool
    for i, (eps, correct, tool) in enumerate([(2, False, "get_x"), (2, False, "get_x"), (2, False, "get_x"),
                                              (2, True, "get_x"), (1, True, "get_x"), (0, False, "")]):
        p2.append(f"s_a_{i},t{i},a,weather,easy,syn,semantic_wrong,{tool},True,True,{eps},0.0,False,0,1e-5,"
                  f"\"answer, {i}\",gt,q,{correct},{correct},{correct},{correct},{correct}\n")
    for i in range(4):
        p2.append(f"s_b_{i},t{i},b,weather,easy,syn,semantic_wrong,{'get_x' if i == 0 else ''},False,False,0,0.0,"
                  f"False,0,1e-5,a,gt,q,False,False,False,False,True\n")
    (d / "p2_all_rejudged.csv").write_text("".join(p2))
    judge = [JUDGE_HEADER]
    votes = [(1, 1, 1, 1), (0, 1, 1, 0), (1, 0, 0, 0), (0, 0, 0, 0), (1, 1, 0, 1), (0, 1, 0, 1)]
    for i, (h, g1, g2, g3) in enumerate(votes):
        maj = g1 + g2 + g3 >= 2
        judge.append(f"j{i},t{i},a,p2_semantic_wrong,{bool(h)},{bool(g1)},{bool(g2)},{bool(g3)},{maj},False,False,"
                     f"\"cand, {i}\",ref\n")
    (d / "ensemble_judge.csv").write_text("".join(judge))
    (d / "human_labels_ann.csv").write_text("session_id,task_id,model,annotator,label\nj0,t0,a,ann,YES\nj3,t3,a,ann,NO\n")
    return d


def test_import_writes_a_run_the_report_reads(anchors: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    counts = import_agentprop(anchors, out)
    assert counts == {"interceptor": 12, "p2": 10, "judges": 18}
    rows = pl.scan_ipc(str(out / "trials" / "*.arrow")).collect()
    assert set(rows["status"]) == {"ok"}
    console = Console(record=True, width=160)
    print_report(out, console)
    text = console.export_text()
    assert "hop rates" in text and "Cohen's kappa" in text and "interceptor (arm − its control" in text
    assert (out / "human_labels" / "human_labels_ann.csv").is_file()


def test_interceptor_pairs_by_task(anchors: Path, tmp_path: Path) -> None:
    import_agentprop(anchors, tmp_path / "run")
    rows = _rows(pl.scan_ipc(str(tmp_path / "run" / "trials" / "*.arrow")), "interceptor")
    eff = interceptor_effect(rows).to_dicts()[0]
    assert eff["pairs"] == 6 and eff["arm"] == "control+interceptor"
    assert eff["hallucinated_control"] == pytest.approx(4 / 6) and eff["hallucinated_arm"] == pytest.approx(1 / 6)
    assert eff["hallucinated_discordant"] == "0/3"          # arm-only / control-only
    assert eff["hallucinated_mcnemar_p"] == pytest.approx(0.25)
    assert eff["abstained"] == pytest.approx(2 / 6)


def test_hop_rates_and_tool_call_rate(anchors: Path, tmp_path: Path) -> None:
    import_agentprop(anchors, tmp_path / "run")
    rows = _rows(pl.scan_ipc(str(tmp_path / "run" / "trials" / "*.arrow")), "p2")
    hops = {r["model"]: r for r in hop_rates(rows).to_dicts()}
    assert (hops["a"]["n_s1"], hops["a"]["n_s2"], hops["a"]["n_s3"]) == (5, 4, 3)
    assert hops["a"]["r23_rate"] == pytest.approx(0.75)
    assert hops["b"]["n_s1"] == 0
    tools = {r["model"]: r["tool_rate"] for r in fabrication(rows).to_dicts()}
    assert tools == {"a": pytest.approx(5 / 6), "b": pytest.approx(1 / 4)}


def test_kappa_against_the_judge_majority(anchors: Path, tmp_path: Path) -> None:
    import_agentprop(anchors, tmp_path / "run")
    frame = pl.scan_ipc(str(tmp_path / "run" / "trials" / "*.arrow"))
    raters = rater_table(frame, "judges", ["gpt4o", "gemini_25_flash", "gpt4o_mini"])
    k = kappas(raters, pl.DataFrame(schema={"case_id": pl.String}))
    heuristic = k.filter((pl.col("rater") == "heuristic") & (pl.col("reference") == "ensemble"))["kappa"][0]
    # heuristic 1,0,1,0,1,0 vs majority 1,1,0,0,1,1: agreement 3/6, p_e = 0.5*4/6 + 0.5*2/6 = 0.5 → kappa 0
    assert heuristic == pytest.approx(0.0)


def test_refuses_to_overwrite_and_names_missing_columns(anchors: Path, tmp_path: Path) -> None:
    import_agentprop(anchors, tmp_path / "run")
    with pytest.raises(UserError, match="already holds a run"):
        import_agentprop(anchors, tmp_path / "run")
    import_agentprop(anchors, tmp_path / "run", force=True)
    (anchors / "p2_all_rejudged.csv").write_text("session_id,task_id\nx,y\n")
    with pytest.raises(UserError, match=r"p2_all_rejudged.csv:1: missing columns model, domain"):
        import_agentprop(anchors, tmp_path / "other")


def test_cli(anchors: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["import", "agentprop", str(anchors), "--out", str(tmp_path / "cli")])
    assert result.exit_code == 0, result.output
    assert "report it with:" in result.output and "judges            18 rows" in result.output
    bad = CliRunner().invoke(app, ["import", "agentprop", str(tmp_path / "nowhere")])
    assert bad.exit_code == 2
