"""The metric catalogue: what the read side knows about each metric of each task (its
direction, the roles it plays in reports, its label, its kind of values, its conditional
partner and its parts in report panels), and the questions asked of it (``hinted``,
``headline``, ``binary``, ...).

A catalogue is ``{task: {metric: info}}``, built by ``build`` from task documents: the
metric entries of the task YAMLs (``metric_list``, each with an optional ``report:`` hint,
docs/metrics.md), or of a task as a run recorded it. lm-eval writes each task's config,
``metric_list`` included, into the run's results JSON, so a run carries the definitions
it was run with (``recorded``); ``drift_eval.tasks.metric_catalogue`` builds today's from
the YAMLs in the package. Pure Python: reads no file and imports neither lm-eval nor torch.
"""
from __future__ import annotations

import re

#: the kinds of per-sample values a metric can declare (its ``report:`` hint's ``values``),
#: none of them 0/1 outcomes, and the range each gives a sample (``None``: no bound):
#: a share in [0, 1], a count or a rate at least 0, another continuous value anything finite
KINDS = {"share": (0.0, 1.0), "count": (0.0, None), "rate": (0.0, None), "continuous": (None, None)}
#: the roles a metric can have in reports (the ``role`` of its YAML ``report:`` hint)
ROLES = ("headline", "key", "summary", "curve", "timeline", "confidence", "profile", "time", "cause")


def _hint(raw, where: str) -> dict:
    """A ``report:`` hint, normalised: ``roles`` (a tuple), ``label`` (str or None) and the
    metric's ``parts`` in report panels (``{panel: part or {part: metric}}``)."""
    if raw is None:
        return {"roles": (), "label": None, "format": None, "conditional": None, "values": None, "parts": {}}
    if isinstance(raw, (str, list)):
        raw = {"role": raw}
    if not isinstance(raw, dict):
        raise ValueError(f"{where}: a report hint is a role, a list of roles or a mapping, got {raw!r}")
    role = raw.get("role") or []
    roles = tuple([role] if isinstance(role, str) else role) if isinstance(role, (str, list, tuple)) else (role,)
    if not all(isinstance(r, str) for r in roles):
        raise ValueError(f"{where}: a report role is a name, got {role!r}")
    unknown = [r for r in roles if r not in ROLES]
    if unknown:
        raise ValueError(f"{where}: unknown report role {unknown[0]!r}; roles are {', '.join(ROLES)}")
    label, fmt = raw.get("label"), raw.get("format")
    if fmt not in (None, "percent"):
        raise ValueError(f"{where}: a report hint's format is percent (or left out), got {fmt!r}")
    partner = raw.get("conditional")
    if partner is not None and not isinstance(partner, str):
        raise ValueError(f"{where}: a report hint's conditional names the unconditional partner metric, got {partner!r}")
    values = raw.get("values")
    if values not in (None, *KINDS):
        raise ValueError(f"{where}: a report hint's values is {', '.join(KINDS)} (or left out), got {values!r}")
    parts = {k: v for k, v in raw.items() if k not in ("role", "label", "format", "conditional", "values")}
    return {"roles": roles, "label": label if isinstance(label, str) else None, "format": fmt,
            "conditional": partner, "values": values, "parts": parts}


def build(documents) -> dict:
    """``{task: {metric: info}}`` from ``(where, document)`` pairs, in order. A document is a
    task's (``task`` and ``metric_list``) or a group's (``group``, its ``task`` list and
    ``aggregate_metric_list``); ``where`` names it in messages. ``info``:
    ``higher_is_better`` (bool or None), ``roles`` (the ``report:`` hint's roles),
    ``report`` (its first role, or None), ``label`` (how reports name the metric, or None),
    ``format`` (``percent`` for a relative change, or None), ``conditional`` (for a metric
    defined only on the documents where an outcome occurred: the metric of the same task
    that asks its question on every document; else None), ``values`` (the declared kind,
    ``KINDS``: ``share`` for a per-sample share between 0 and 1, ``count`` or ``rate`` for
    one at least 0, ``continuous`` for another value: values that are not 0/1 outcomes,
    though they may all be 0 or 1 in one run; else None) and ``parts`` (the metric's parts
    in report panels). A malformed hint is a ``ValueError`` naming ``where``.

    The roles: ``headline`` (the task's headline: the report's first table), ``key``
    (compared between runs), ``summary`` (also in the summary table and the leaderboard),
    ``curve`` (drawn, not tabled), ``timeline`` (a per-sample list of segment languages:
    survival curves and audit strips), ``confidence`` (the per-sample list of those
    languages' probabilities), ``profile`` (a list-valued profile over positions), ``time``
    (the time in the language: the share of a sample kept before its first part that is
    not) and ``cause`` (one cause of "not kept": a 0/1 per sample, the causes of a task
    adding up with its headline to 1). A hint is a role, a list of roles, or a mapping with
    ``role``, ``label`` and panel parts, e.g. ``series: {prefix: alpha_l, by: layer, label:
    α}`` (the metrics ``alpha_l00``, ``alpha_l01``, ... are a curve by layer). A group's
    aggregate metrics are its headline, in the direction its tasks give them."""
    out, groups = {}, {}
    for where, doc in documents:
        name = doc.get("group") or doc.get("task")
        if not isinstance(name, str):
            continue
        entries = [e for e in doc.get("metric_list") or doc.get("aggregate_metric_list") or []
                   if isinstance(e, dict) and isinstance(e.get("metric"), str)]
        out[name] = {}
        for e in entries:
            if e.get("higher_is_better") not in (True, False, None):
                raise ValueError(f"{where}: {e['metric']}'s higher_is_better is true, false or null, got "
                                 f"{e['higher_is_better']!r}")
            hint = _hint(e.get("report"), f"{where}: {e['metric']}")
            if doc.get("group"):
                hint["roles"] = ("headline",)
            out[name][e["metric"]] = {"higher_is_better": e.get("higher_is_better"), **hint,
                                      "report": hint["roles"][0] if hint["roles"] else None}
        for metric, info in out[name].items():
            if info["conditional"] is not None and info["conditional"] not in out[name]:
                raise ValueError(f"{where}: {metric}'s conditional partner {info['conditional']!r} is not a "
                                 f"metric of {name}")
        if doc.get("group"):
            groups[name] = [t for t in doc.get("task") or [] if isinstance(t, str)]
    for group, tasks in groups.items():
        for metric, info in out[group].items():
            directions = {out.get(t, {}).get(metric, {}).get("higher_is_better") for t in tasks} - {None}
            if info["higher_is_better"] is None and len(directions) == 1:
                info["higher_is_better"] = directions.pop()
    return out


#: the key with which the plugin stamps the metadata of each of its tasks' configs
#: (``drift_eval.plugin.task_base``): a task so stamped is one of this package's
STAMP = "lm_eval_drift_version"


#: the roles that say what a metric's values are (and so how they are read): a run's own
#: record decides them, with its direction, its kind (``values``) and its conditional
#: partner; the roles that lay a report out (headline, key, summary, curve), the label, the
#: format and the panel parts are today's, where today's YAMLs still define the metric
MEANING_ROLES = ("cause", "time", "timeline", "confidence", "profile")


def recorded(res: dict, where: str = "results file", today: dict | None = None) -> dict:
    """The catalogue a run recorded, from its results JSON's ``configs`` (lm-eval writes each
    task's config, ``metric_list`` and its ``report:`` hints included), for the tasks of
    this package (``STAMP`` in their metadata) that list their metrics, and the groups all
    of whose tasks are among them (their aggregate metrics: the ``groups`` section's, with
    the directions of the run's ``higher_is_better``). Other tasks are left out: their
    results say what they are.

    What a metric means comes from the record: its direction, its kind of values, its
    conditional partner and its ``MEANING_ROLES``. How a report lays it out (the other
    roles, the label, the format, the panel parts) comes from ``today``
    (``drift_eval.tasks.metric_catalogue()``) for the metrics it still defines, so that an
    old run reads as it was run and shows as today's reports show. ``where`` names the
    file in a ``ValueError``."""
    configs = res.get("configs") if isinstance(res.get("configs"), dict) else {}
    docs = [(f"{where}: configs['{name}']", {"task": name, "metric_list": c["metric_list"]})
            for name, c in configs.items()
            if isinstance(c, dict) and isinstance(c.get("metadata"), dict) and STAMP in c["metadata"]
            and isinstance(c.get("metric_list"), list) and c["metric_list"]]
    ours = {d["task"] for _, d in docs}
    groups = res.get("group_subtasks") if isinstance(res.get("group_subtasks"), dict) else {}
    directions = res.get("higher_is_better") if isinstance(res.get("higher_is_better"), dict) else {}
    results = res.get("groups") if isinstance(res.get("groups"), dict) else {}
    for group, tasks in groups.items():
        if not isinstance(tasks, list) or not tasks or not set(tasks) <= ours:
            continue
        hib = directions.get(group) if isinstance(directions.get(group), dict) else {}
        metrics = [key.partition(",")[0] for key in (results.get(group) or {})
                   if key.endswith(",none") and not key.partition(",")[0].endswith("_stderr")]
        docs.append((f"{where}: groups['{group}']", {
            "group": group, "task": tasks,
            "aggregate_metric_list": [{"metric": m, "higher_is_better": hib.get(m)} for m in metrics]}))
    out = build(docs)
    for task, metrics in out.items():
        for metric, info in metrics.items():
            now = ((today or {}).get(task) or {}).get(metric)
            if now is not None:
                roles = tuple(r for r in now["roles"] if r not in MEANING_ROLES) + \
                    tuple(r for r in info["roles"] if r in MEANING_ROLES)
                metrics[metric] = {**now, "roles": roles, "report": roles[0] if roles else None,
                                   **{k: info[k] for k in ("higher_is_better", "values", "conditional")}}
    return out


def hinted(catalogue: dict, task: str, *hints) -> list:
    """Metrics of ``task`` that have one of the roles ``hints``, in YAML order."""
    return [m for m, info in catalogue.get(task, {}).items() if set(info.get("roles", ())) & set(hints)]


def conditional_partner(catalogue: dict, task: str, metric: str) -> str | None:
    """For a *conditional* metric (defined only on the documents where an outcome occurred,
    e.g. ``drift_given_start`` on the answers that started French), its unconditional
    partner: the metric of the same task that answers the same question on every
    (determined) document, so that two runs are compared on the same documents rather than
    on those each run's outcome selected. None for a metric that is not conditional. From
    the ``conditional:`` key of the metric's ``report:`` hint (docs/metrics.md)."""
    return (catalogue.get(task, {}).get(metric) or {}).get("conditional")


def binary(catalogue: dict, task: str, metric: str) -> bool | None:
    """False for a metric whose YAML hint declares its kind of values (``KINDS``: a share, a
    count, a rate, another continuous value: never tested or bounded as 0/1 outcomes, even
    in a run where every value happens to be 0 or 1); None otherwise (its values decide:
    ``drift_eval.metrics.stats.is_binary``)."""
    return False if (catalogue.get(task, {}).get(metric) or {}).get("values") in KINDS else None


def value_range(catalogue: dict, task: str, metric: str) -> tuple:
    """(lowest, highest) a sample of the metric may be, from its declared kind (``KINDS``);
    ``(None, None)`` when it declares none."""
    return KINDS.get((catalogue.get(task, {}).get(metric) or {}).get("values"), (None, None))


def share(catalogue: dict, task: str, metric: str) -> bool:
    """Whether the metric's per-sample values are shares between 0 and 1 (``values: share``)."""
    return (catalogue.get(task, {}).get(metric) or {}).get("values") == "share"


def exact_share(catalogue: dict, task: str, metric: str) -> bool:
    """Whether the metric is a share with the ``time`` role, whose interval is the exact one of
    its sum (``stats.share_sum_interval``): mostly 0 or 1 per sample, where the bootstrap's
    coverage falls short."""
    return share(catalogue, task, metric) and "time" in ((catalogue.get(task, {}).get(metric) or {}).get("roles") or ())


def headline(catalogue: dict, task: str) -> str | None:
    """The task's headline metric (its first metric with the ``headline`` role), or None."""
    names = hinted(catalogue, task, "headline")
    return names[0] if names else None


def label(catalogue: dict, task: str, metric: str) -> str:
    """How reports name a metric: its hint's ``label``, else its name."""
    return (catalogue.get(task, {}).get(metric) or {}).get("label") or metric


def parts(catalogue: dict, task: str, panel: str) -> dict:
    """``{part: metric}`` of one report panel for ``task``: a metric whose hint says
    ``<panel>: <part>`` is that part; a mapping ``<panel>: {part: metric}`` names metrics
    the task adds at run time."""
    out = {}
    for metric, info in catalogue.get(task, {}).items():
        value = info.get("parts", {}).get(panel)
        if isinstance(value, str):
            out[value] = metric
        elif isinstance(value, dict):
            out.update({k: v for k, v in value.items() if isinstance(v, str)})
    return out


def series(catalogue: dict, task: str) -> list:
    """The task's curves: each metric hint's ``series: {prefix, by, label, range}`` (``range``:
    the y axis's fixed bounds, optional), as dicts with
    the declaring ``metric``; the curve's points are the metrics named ``prefix`` followed
    by an integer (the x value, a turn, a layer ...), listed in the YAML or added at run time."""
    out = []
    for metric, info in catalogue.get(task, {}).items():
        spec = info.get("parts", {}).get("series")
        if isinstance(spec, dict) and isinstance(spec.get("prefix"), str):
            bounds = spec.get("range")
            out.append({"metric": metric, "prefix": spec["prefix"], "by": spec.get("by") or "index",
                        "label": spec.get("label") or spec["prefix"],
                        "range": tuple(bounds) if isinstance(bounds, list) and len(bounds) == 2 else None})
    return out


def series_points(spec: dict, names) -> list:
    """``[(x, metric)]`` of the metrics among ``names`` that are points of the curve
    ``spec`` (from ``series``), sorted by x."""
    pattern = re.compile(re.escape(spec["prefix"]) + r"(\d+)")
    return sorted((int(m.group(1)), n) for n in names if (m := pattern.fullmatch(n)))


def is_curve(catalogue: dict, task: str, metric: str) -> bool:
    """Points of a curve (per turn, per layer, ...): drawn, not listed in tables."""
    if "curve" in (catalogue.get(task, {}).get(metric) or {}).get("roles", ()):
        return True
    return any(series_points(spec, [metric]) for spec in series(catalogue, task))
