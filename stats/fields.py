"""Field-level precision, recall and F1 over sets of (unit, field) tuples.

Why this exists: an auditor that lists ungrounded tool-call arguments is
scored per field, not per trace, and the conventions for empty sets decide
whether a silent auditor looks perfect or useless; they are fixed here once.

Conventions: precision = |P ∩ G| / |P| and is 1.0 when nothing is predicted
(no false claim was made); recall = |P ∩ G| / |G| and is 1.0 when there is
nothing to find; F1 is their harmonic mean and 0.0 when both are 0. So an
empty prediction against empty gold scores 1 / 1 / 1, an empty prediction
against non-empty gold 1 / 0 / 0, and any prediction against empty gold
0 / 1 / 0.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable

from stats.results import FieldScores


def field_scores(predicted: Iterable[Hashable], gold: Iterable[Hashable]) -> FieldScores:
    """Micro-averaged precision / recall / F1 of ``predicted`` against ``gold``.

    Parameters
    ----------
    predicted : iterable of hashable
        The items flagged, typically ``(unit, field)`` tuples so that the same
        field name on different traces counts separately.
    gold : iterable of hashable
        The items that should have been flagged.

    Returns
    -------
    res : FieldScores
        ``precision``, ``recall``, ``f1`` and the ``true_positives``,
        ``false_positives`` and ``false_negatives`` counts.

    Notes
    -----
    Duplicates are ignored (set semantics). precision = |P ∩ G| / |P|, 1.0
    when nothing is predicted; recall = |P ∩ G| / |G|, 1.0 when there is
    nothing to find; F1 is their harmonic mean, 0.0 when both are 0 (the
    module docstring lists the cases). As ``sklearn.metrics`` micro averages
    over the items, except for those empty-set conventions.
    """
    p = set(predicted)
    g = set(gold)
    tp = len(p & g)
    fp = len(p) - tp
    fn = len(g) - tp
    precision = tp / len(p) if p else 1.0
    recall = tp / len(g) if g else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
    return FieldScores(precision=precision, recall=recall, f1=f1, true_positives=tp, false_positives=fp,
                       false_negatives=fn)
