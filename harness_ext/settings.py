"""Compensation settings: parsing, labels and folder names. Pure Python, no torch.

A setting is a compensation shape, a strength and a span. It is written as a *label*
(``none``, ``log:0.25``, ``const:0.5``, ``head:1``; ``@prompt`` is appended for
``span=prompt``), the form every command takes and every report and gate shows. A sweep
stores each setting in a folder named after its label (``log:0.25`` -> ``log_0.25``).
The bias itself is in ``drift_eval.compensation``.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

from drift_eval.errors import DriftUsageError

MODES = ("none", "log", "const", "head")
SPANS = ("system", "prompt")


#: numbers as options and settings are written: ASCII digits only (``float()`` and ``int()``
#: would also take other scripts' digits, ``1_000``, and ``str.isdigit`` superscripts, which
#: ``int()`` then refuses with a traceback)
_INT = re.compile(r"[+-]?[0-9]+")
_FLOAT = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def parse_number(value, whole: bool = False):
    """``value`` as a number (``whole``: an ``int``), or None: a JSON or Python number (not
    a boolean), or text of ASCII digits (with a sign, a point and an exponent unless
    ``whole``), spaces around it allowed. The one place every option's number is read."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return (int(value) if value.is_integer() else None) if whole else value
    if isinstance(value, str):
        text = value.strip()
        if (_INT if whole else _FLOAT).fullmatch(text):
            return int(text) if whole else float(text)
    return None


@dataclass(frozen=True)
class CompensationConfig:
    mode: str = "none"
    strength: float = 1.0
    span: str = "system"

    @classmethod
    def parse(cls, mode="none", strength=1.0, span="system") -> "CompensationConfig":
        mode = str(mode).strip().lower()
        if mode not in MODES:
            raise DriftUsageError(f"unknown compensation '{mode}': use one of {', '.join(MODES)}")
        number = parse_number(strength)
        if number is None:
            raise DriftUsageError(f"strength must be a number >= 0, got '{strength}'")
        strength = float(number)
        if not math.isfinite(strength) or strength < 0:
            raise DriftUsageError(f"strength must be a finite number >= 0, got {strength}")
        span = str(span).strip().lower()
        if span not in SPANS:
            raise DriftUsageError(f"unknown span '{span}': use one of {', '.join(SPANS)}")
        return cls(mode, strength, span)

    @classmethod
    def from_label(cls, label: str, span="system") -> "CompensationConfig":
        """``none``, ``log``, ``log:0.25``, ``const:0.5@prompt``...: the form ``label()`` writes
        (a ``@span`` suffix overrides ``span``)."""
        text, _, suffix = str(label).strip().partition("@")
        mode, _, strength = text.partition(":")
        return cls.parse(mode, strength if strength.strip() else 1.0, suffix or span)

    @classmethod
    def from_model_args(cls, model_args) -> "CompensationConfig":
        """The setting in a results file's ``config.model_args`` (``parse_model_args``;
        ``none`` when absent)."""
        model_args = parse_model_args(model_args)
        return cls.parse(model_args.get("compensation", "none"), model_args.get("strength", 1.0),
                         model_args.get("span", "system"))

    @property
    def active(self) -> bool:
        return self.mode != "none" and self.strength > 0

    def label(self) -> str:
        """``none``, ``log:0.25``...; ``@prompt`` marks ``span=prompt`` (the default span,
        ``system``, is not written)."""
        base = "none" if self.mode == "none" else f"{self.mode}:{self.strength:g}"
        return base if self.span == "system" or self.mode == "none" else f"{base}@{self.span}"

    def folder(self) -> str:
        """The folder a sweep writes this setting to (``log:0.25`` -> ``log_0.25``)."""
        return folder_name(self.label())

    def model_args(self) -> dict:
        """The ``hf-drift`` model_args of this setting."""
        return {"compensation": self.mode, "strength": self.strength, "span": self.span}


def parse_model_args(model_args) -> dict:
    """lm-eval's ``model_args`` as a dict: a dict as it is, the ``key=value,...`` string
    lm-eval keeps for some callers split at commas and at each entry's first ``=`` (values
    stay text; entries without ``=`` are left out), anything else (absent) empty."""
    if isinstance(model_args, str):
        return dict(kv.split("=", 1) for kv in model_args.split(",") if "=" in kv)
    return model_args if isinstance(model_args, dict) else {}


def folder_name(label: str) -> str:
    """The folder a sweep writes a setting to (``log:0.25`` -> ``log_0.25``)."""
    return label.replace(":", "_").replace("@", "_")


def setting_label(model_args) -> str:
    """The label of the setting in a results file's ``config.model_args``."""
    return CompensationConfig.from_model_args(model_args).label()


def parse_settings(text: str, span: str = "system") -> list[CompensationConfig]:
    """``none,log:0.1,const:0.25`` -> configs, duplicates dropped; every entry is checked
    before any is used."""
    out, seen = [], set()
    for item in (s.strip() for s in str(text).split(",")):
        if not item:
            continue
        cfg = CompensationConfig.from_label(item, span)
        if cfg.label() not in seen:
            seen.add(cfg.label())
            out.append(cfg)
    if not out:
        raise DriftUsageError("--settings is empty: give e.g. none,log:0.25,const:0.25")
    return out


def int_option(name: str, value, minimum: int, maximum: int | None = None) -> int:
    """An integer option (``--metadata``, task arguments) in ``[minimum, maximum]``; any
    other value (text, a fraction, a boolean, out of range) is one ``DriftUsageError`` line."""
    number = parse_number(value, whole=True)
    ok = number is not None
    value = number if ok else value
    span = f"between {minimum} and {maximum}" if maximum is not None else f">= {minimum}"
    if not ok or value < minimum or (maximum is not None and value > maximum):
        raise DriftUsageError(f"{name} must be a whole number {span}, got {value!r}")
    return value


CONVERSATION_CACHE = ("off", "on", "auto")
CONVERSATION_CACHE_MB = 8192  # the default cap on what a run's conversations keep between turns


def conversation_cache_setting(mode="off", limit_mb=CONVERSATION_CACHE_MB) -> tuple[str, int]:
    """``hf-drift``'s ``conversation_cache`` (``off``, ``on`` or ``auto``; lm-eval's
    ``true``/``false`` read as ``on``/``off``) and ``conversation_cache_mb`` (a whole number
    of MiB >= 1), checked: anything else is one ``DriftUsageError`` line."""
    if isinstance(mode, bool):
        mode = "on" if mode else "off"
    text = str(mode).strip().lower()
    if text not in CONVERSATION_CACHE:
        raise DriftUsageError(f"unknown conversation_cache '{mode}': use one of {', '.join(CONVERSATION_CACHE)}")
    return text, int_option("conversation_cache_mb", limit_mb, 1)
