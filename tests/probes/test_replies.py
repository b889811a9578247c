"""The shared reply rule: empty replies, asking, echoes and template debris (runner/probes/replies.py)."""

from __future__ import annotations

import random

import pytest

from runner.core.types import ChatResponse, ToolCall
from runner.probes.negative import NegativeCase, score_response
from runner.probes.replies import asks_user, is_empty, own_text, strip_tokens

REQUEST = "You are a support assistant.\nCan you check the status of my order?"


@pytest.mark.parametrize("text", ["", "   \n\t", "<end_of_turn>", "<|im_end|>\n", "<start_of_turn>model\n<end_of_turn>",
                                  "</s>", "[INST] [/INST]"])
def test_nothing_but_whitespace_and_template_tokens_is_empty(text: str) -> None:
    assert is_empty(text, 0)
    assert not asks_user(text, REQUEST)


def test_a_reply_with_a_call_is_never_empty() -> None:
    assert not is_empty("", 1)
    assert strip_tokens("<start_of_turn>Hi<end_of_turn>") == "Hi"


@pytest.mark.parametrize("text", [
    "Can you check the status of my order?",                    # the user's own words
    "can you check the status of my order ?",                   # the same, re-spaced
    "Sure. Can you check the status of my order",               # no question mark, still an echo
])
def test_echoed_questions_do_not_ask(text: str) -> None:
    assert not asks_user(text, REQUEST)


@pytest.mark.parametrize("text", [
    "<<SYS>> I have a question about my order. What is my order status?",
    "<USER> What is the status of order 5512?",
    "[INST] Where is my parcel? [/INST]",
    "<start_of_turn>user\nWhat's the weather in Paris?<end_of_turn>",
    "Okay.\nUser: which carrier did you use?",
])
def test_questions_in_template_debris_do_not_ask(text: str) -> None:
    assert not asks_user(text, REQUEST)


def test_debris_is_cut_and_the_assistant_turn_read_again() -> None:
    text = "[INST] What is my order id? [/INST] Could you give me your order number?"
    assert own_text(text) == "Could you give me your order number?"
    assert asks_user(text, REQUEST)


@pytest.mark.parametrize("text", [
    "Which order do you mean? Please give me the order number.",
    "I can do that, but I need the tracking number first. Could you send it?",
    "Which carrier is it?",
    "Please provide the order ID.",
])
def test_real_questions_ask(text: str) -> None:
    assert asks_user(text, REQUEST)


@pytest.mark.parametrize("text", [
    "Is there anything else I can help you with?",
    "How can I help you today?",
    "Can I check my order?",                                     # the user's voice
    "The order shipped. Thanks!",
])
def test_offers_user_voice_and_statements_do_not_ask(text: str) -> None:
    assert not asks_user(text, REQUEST)


def _case(**kw: object) -> NegativeCase:
    return NegativeCase.model_validate({"id": "c", "user": "Can you check the status of my order?", **kw})


@pytest.mark.parametrize("expect", ["no_call", "ask_user", None])
def test_negative_empty_reply_is_never_a_pass_or_no_call(expect: str | None) -> None:
    case = _case(expect_action=expect, must_not_infer=["order_id"])
    v = score_response(case, ChatResponse(text="  <end_of_turn> "), {"get_order"}, REQUEST)
    assert v["action"] == "empty_reply" and v["empty_reply"] is True
    assert v["passed"] is False and v["action_ok"] is False and v["asked"] is False
    assert "empty reply: no tool call and no text" in v["reasons"]


def test_negative_echo_is_no_call_not_ask_user() -> None:
    case = _case(expect_action="ask_user")
    v = score_response(case, ChatResponse(text="Can you check the status of my order?"), {"get_order"}, REQUEST)
    assert v["action"] == "no_call" and not v["passed"] and not v["asked"] and not v["empty_reply"]


def test_negative_text_calls_flagged() -> None:
    case = _case(expect_action="get_order", positive=True)
    call = ToolCall("get_order", "{}", {}, "t0")
    v = score_response(case, ChatResponse(tool_calls=(call,), calls_from_text=1), {"get_order"}, REQUEST)
    assert v["calls_from_text"] is True and v["action"] == "call:get_order"


def test_asking_judge_reads_verdicts_and_reports_agreement() -> None:
    from runner.probes.ask_judge import agreement, judge_messages, parse_verdict

    assert parse_verdict("ASKS: YES") is True and parse_verdict("asks:no.") is False and parse_verdict("maybe") is None
    assert "(empty)" in judge_messages("Where is my order?", "  ")[1].content
    a = agreement([True, False, True, False], [True, False, False, None])
    assert (a.n, a.unparsed) == (3, 1) and abs(a.agree - 2 / 3) < 1e-9 and abs(a.kappa - 0.4) < 1e-9


# --- the echo rule's cheap path gives difflib's verdicts -------------------------------------------


def _is_echo_difflib(sentence: str, request_sentences: list[str]) -> bool:
    """The rule ``_is_echo`` replaced, verbatim: difflib's ratio on every normalised pair."""
    from difflib import SequenceMatcher

    from runner.probes.replies import _ECHO_RATIO, _norm

    own = _norm(sentence)
    if not own:
        return True
    for other in request_sentences:
        theirs = _norm(other)
        if not theirs:
            continue
        if (len(own.split()) >= 3 and own in theirs) or SequenceMatcher(None, own, theirs).ratio() >= _ECHO_RATIO:
            return True
    return False


_WORDS = ("can you check the status of my order please send tracking number which carrier did use what is "
          "weather in paris account balance refund invoice 5512 ship tomorrow address confirm email a an to "
          "for it was i need help".split())


def _mutate(rng: random.Random, text: str, edits: int) -> str:
    """``text`` after ``edits`` random character or word edits (insert, delete, substitute, swap)."""
    chars = list(text)
    for _ in range(edits):
        op = rng.randrange(5)
        pos = rng.randrange(len(chars) + 1)
        if op == 0:
            chars.insert(pos, rng.choice("abcdefghijklmnopqrstuvwxyz ?.,"))
        elif op == 1 and chars:
            del chars[min(pos, len(chars) - 1)]
        elif op == 2 and chars:
            chars[min(pos, len(chars) - 1)] = rng.choice("aeiou tsrn")
        elif op == 3:
            chars[pos:pos] = list(" " + rng.choice(_WORDS))
        else:
            words = "".join(chars).split()
            if len(words) > 1:
                i, j = rng.randrange(len(words)), rng.randrange(len(words))
                words[i], words[j] = words[j], words[i]
            chars = list(" ".join(words))
    return "".join(chars)


def _pairs(seed: int, n: int) -> list[tuple[str, list[str]]]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        # short sentences, and long ones (≥ 200 characters, where difflib's autojunk heuristic applies)
        words = rng.randint(1, 12) if rng.random() < 0.8 else rng.randint(30, 50)
        base = " ".join(rng.choice(_WORDS) for _ in range(words)) + rng.choice(["?", ".", "", " ?"])
        reply = _mutate(rng, base, rng.choice([0, 1, 2, 3, 5, 8, 13, 20]))
        if rng.random() < 0.3:
            reply = reply.upper() if rng.random() < 0.5 else reply.replace(" ", "  ,")
        others = [_mutate(rng, base, rng.randint(0, 12)) for _ in range(rng.randint(0, 2))]
        request = [base, *others, rng.choice(["", "   ", "?!", "You are a support assistant."])]
        rng.shuffle(request)
        out.append((reply, request))
    return out


@pytest.mark.parametrize("seed", [0, 1])
def test_echo_rule_gives_difflibs_verdict_on_generated_pairs_near_the_threshold(seed: int) -> None:
    from difflib import SequenceMatcher

    from runner.probes.replies import _ECHO_RATIO, _is_echo, _norm

    pairs = _pairs(seed, 1_200)
    near = 0
    for reply, request in pairs:
        assert _is_echo(reply, request) == _is_echo_difflib(reply, request), (reply, request)
        ratios = [SequenceMatcher(None, _norm(reply), _norm(r)).ratio() for r in request if _norm(r)]
        near += any(abs(r - _ECHO_RATIO) <= 0.05 for r in ratios)
    # the generator reaches the threshold's neighbourhood often enough to test the bounds there
    assert near >= 100
    verdicts = {_is_echo_difflib(reply, request) for reply, request in pairs}
    assert verdicts == {True, False}


@pytest.mark.parametrize(("reply", "sentences", "echo"), [
    ("abcdefghij", ["abcdefghxy"], True),            # ratio exactly 2·8/20 = 0.8: both bounds pass, difflib decides
    ("abcdefghij", ["abcdefgxyz"], False),           # 2·7/20 = 0.7, both bounds still ≥ 0.8
    ("abcd", ["abcd efghijklmno"], False),           # the length bound decides: 2·4/20 = 0.4
    ("abcdefghij", ["jihgfedcba"], False),           # the shared-characters bound is 1.0, difflib says 0.1
    ("my order status", ["where is my order status now please"], True),   # contained, three words
    ("order status", ["where is my order status now please"], False),     # contained, two words, ratio 0.5
    ("?!", ["anything"], True),                      # no words: nothing to ask
])
def test_echo_rule_at_the_bounds(reply: str, sentences: list[str], echo: bool) -> None:
    from runner.probes.replies import _is_echo

    assert _is_echo_difflib(reply, sentences) is echo
    assert _is_echo(reply, sentences) is echo
