"""What free generation still carries of the prompt (pure maths: numpy, scikit-learn, no
torch).

Two prompts x (a scene) and x' (a variant of it) each start N free generations. At the
nominal centres ``t = 16, 32, …`` of α's octave windows:

* **hidden-state decodability**: a cross-validated linear probe per layer and t tells,
  from the residual stream at generated token t, which prompt a trajectory came from;
* **text decodability**: the same probe on a bag of the generated tokens (the
  ``text_window`` tokens up to t), the "from the text" reading;
* **language switches**: a trajectory switched when the majority fastText language of its
  128-token segments differs from the prompt's language.

The probe is a ridge classifier (standardised features, the penalty chosen among
``ALPHAS`` by exact leave-one-out on the training folds, scikit-learn's
``RidgeClassifierCV``) inside stratified k-fold cross-validation (shuffled, seeded). Ridge
rather than logistic regression: it has a closed form and an exact leave-one-out, so
choosing the penalty costs one eigendecomposition per fold instead of an inner loop of
iterative fits, which matters at layers × t probes per scene and axis with far fewer
trajectories than hidden coordinates; it is deterministic; and with n ≪ d both find nearly
the same separating direction. Accuracies pool the held-out predictions of every scene;
intervals are Wilson intervals (``drift_eval.metrics.stats``).
"""
from __future__ import annotations

from collections import Counter

import numpy as np

from drift_eval.metrics import stats

#: the ridge penalties the probe chooses from (standardised features)
ALPHAS = np.logspace(-2, 6, 17)
PROBE = "ridge classifier (standardised features, penalty by exact leave-one-out), stratified k-fold"
TEXT_PROBE = "ridge classifier on tf-idf bags of generated token ids, stratified k-fold"
UNKNOWN = "unknown"


def centres(length: int, first_centre: int = 16) -> list[int]:
    """The positions ``t = first_centre · 2^k <= length`` (1-based generated tokens): the
    nominal centres of α's octave windows."""
    if first_centre < 1 or length < first_centre:
        raise ValueError(f"need 1 <= first_centre <= length, got {first_centre} and {length}")
    out, t = [], first_centre
    while t <= length:
        out.append(t)
        t *= 2
    return out


def _cv(folds: int, seed: int):
    from sklearn.model_selection import StratifiedKFold  # deferred, start-up: loads pandas, scipy, sklearn

    return StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)


def probe_correct(X, y, folds: int = 5, seed: int = 0) -> np.ndarray:
    """For every cell of ``X`` (cells × samples × features, e.g. one cell per layer and t;
    or one samples × features matrix), how many samples the probe trained on the other folds
    labels correctly (``y``: 0/1)."""
    from sklearn.linear_model import RidgeClassifierCV  # deferred, start-up: loads pandas, scipy, sklearn
    from sklearn.model_selection import cross_val_predict  # deferred, start-up: loads pandas, scipy, sklearn
    from sklearn.pipeline import make_pipeline  # deferred, start-up: loads pandas, scipy, sklearn
    from sklearn.preprocessing import StandardScaler  # deferred, start-up: loads pandas, scipy, sklearn

    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y)
    if X.ndim == 2:
        return probe_correct(X[None], y, folds, seed)[0]
    _check(y, folds)
    cv = _cv(folds, seed)
    clf = make_pipeline(StandardScaler(), RidgeClassifierCV(alphas=ALPHAS))
    return np.array([int((cross_val_predict(clf, cell, y, cv=cv) == y).sum()) for cell in X])


def text_correct(token_lists, y, folds: int = 5, seed: int = 0) -> int:
    """The same for bags of tokens: ``token_lists`` holds one list of token ids per sample;
    tf-idf weights are fitted on the training folds only."""
    # deferred, start-up: loads pandas, scipy, sklearn
    from sklearn.feature_extraction.text import CountVectorizer, TfidfTransformer
    from sklearn.linear_model import RidgeClassifierCV  # deferred, start-up: loads pandas, scipy, sklearn
    from sklearn.model_selection import cross_val_predict  # deferred, start-up: loads pandas, scipy, sklearn
    from sklearn.pipeline import make_pipeline  # deferred, start-up: loads pandas, scipy, sklearn

    y = np.asarray(y)
    _check(y, folds)
    counts = CountVectorizer(analyzer=lambda ids: [str(i) for i in ids]).fit_transform(list(token_lists))
    clf = make_pipeline(TfidfTransformer(), RidgeClassifierCV(alphas=ALPHAS))
    return int((cross_val_predict(clf, counts, y, cv=_cv(folds, seed)) == y).sum())


def _check(y, folds):
    smallest = min(int((y == 0).sum()), int((y == 1).sum()))
    if folds < 2 or smallest < folds:
        raise ValueError(f"{folds}-fold cross-validation needs at least {max(folds, 2)} samples of each prompt, "
                         f"got {smallest}")


def majority_language(labels) -> str:
    """The most frequent known language among a trajectory's segment labels (the earliest
    of the most frequent on a tie); ``unknown`` when no segment is known."""
    known = [lab for lab in labels if lab != UNKNOWN]
    if not known:
        return UNKNOWN
    counts = Counter(known)
    top = max(counts.values())
    return next(lab for lab in known if counts[lab] == top)


def switches(prompt_language: str, majorities) -> dict:
    """Trajectories whose majority language differs from the prompt's: ``switched`` (a
    count), ``n`` and ``to`` (language -> count)."""
    to = Counter(m for m in majorities if m != prompt_language)
    return {"switched": int(sum(to.values())), "n": len(majorities), "to": dict(to.most_common())}


def accuracy(correct, n) -> dict:
    """Accuracy and its 95% Wilson interval from pooled counts (any shape, same for both)."""
    correct = np.asarray(correct, dtype=np.int64)
    n = np.broadcast_to(np.asarray(n, dtype=np.int64), correct.shape)
    acc = np.where(n > 0, correct / np.maximum(n, 1), np.nan)
    lo, hi = np.empty(correct.shape), np.empty(correct.shape)
    for ix in np.ndindex(correct.shape):
        lo[ix], hi[ix] = stats.wilson_interval(int(correct[ix]), int(n[ix]))
    return {"accuracy": acc.tolist(), "lower": lo.tolist(), "upper": hi.tolist()}


def summarise(answers: list[dict]) -> dict:
    """Pool the per-scene answers of one axis (each with ``centres``, ``hidden_correct``
    (layers × t), ``text_correct`` (t), ``predictions`` and ``languages``) into accuracies
    with Wilson intervals per layer × t and per t, headlines at the last t (the median layer
    and the best layer), and the language switches per scene."""
    if not answers:
        raise ValueError("no scenes to summarise")
    cs = answers[0]["centres"]
    if any(a["centres"] != cs for a in answers):
        raise ValueError("scenes were measured at different positions; rerun them together")
    hidden = np.sum([a["hidden_correct"] for a in answers], 0)  # (layers, t)
    text = np.sum([a["text_correct"] for a in answers], 0)
    n = int(sum(a["predictions"] for a in answers))
    h, t = accuracy(hidden, n), accuracy(text, n)
    last = np.asarray(h["accuracy"])[:, -1]
    order = np.argsort(last, kind="stable")
    median_layer = int(order[(len(order) - 1) // 2])  # the lower median: an actual layer, with its interval
    best_layer = int(order[-1])
    out = {"centres": cs, "predictions": n, "scenes": len(answers), "hidden": h, "text": t,
           "hidden_correct": hidden.tolist(), "text_correct": text.tolist(),
           "median_layer": median_layer, "best_layer": best_layer,
           "hidden_accuracy": float(last[median_layer]),
           "hidden_accuracy_lower": h["lower"][median_layer][-1], "hidden_accuracy_upper": h["upper"][median_layer][-1],
           "hidden_accuracy_best": float(last[best_layer]),
           "text_accuracy": t["accuracy"][-1], "text_accuracy_lower": t["lower"][-1], "text_accuracy_upper": t["upper"][-1],
           "hidden_accuracy_by_t": [float(np.median(np.asarray(h["accuracy"])[:, j])) for j in range(len(cs))]}
    for who in ("base", "variant"):
        per_scene = [a["languages"][who]["switched"] for a in answers]
        to = Counter()
        for a in answers:
            to.update(a["languages"][who]["to"])
        out[f"switches_{who}"] = {"per_scene": per_scene, "mean": float(np.mean(per_scene)),
                                  "min": int(min(per_scene)), "max": int(max(per_scene)),
                                  "of": int(answers[0]["languages"][who]["n"]), "to": dict(to.most_common()),
                                  "prompt_languages": dict(Counter(a["languages"][who]["prompt"] for a in answers))}
    return out
