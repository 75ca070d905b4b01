"""The report's sections, in page order: ``SECTIONS`` holds (id, title, builder). A builder
takes the ``Report`` state (``drift_eval.reports.state``) and returns the section's data,
or None to leave the section out; each id has a template in ``templates/html/`` and
``templates/md/``. Generic sections read the task YAMLs' roles (``headline``, ``summary``,
``key``, ``series``); each task family's pictures are a module of their own (``french``, ``languages``,
``alpha``, ``decode``, ``position_bias``), reading the roles and panel parts of its YAMLs,
never a task's name."""
from drift_eval.reports.sections import (alpha, comparisons, curves, decode, french, headline, languages,
                                         position_bias, provenance, runs, summary, verdict)

SECTIONS = (
    ("headline", "Headline", headline.build),
    ("verdict", "Verdict", verdict.build),
    ("languages", "Languages", languages.build),
    ("survival", "The instructed language over the answer", french.survival),
    ("summary", "Summary", summary.build),
    ("curves", "Curves", curves.build),
    ("settings", "Against no compensation", comparisons.settings),
    ("baseline", "Candidate against baseline", comparisons.baseline),
    ("runs", "Runs", runs.build),
    ("audit", "Audit: segment languages per answer", french.audit),
    ("profiles", "Positional-bias influence profiles", position_bias.profiles),
    ("decodability", "What free generation still carries (decodability)", decode.decodability),
    ("direct-relay", "Why α is what it is (direct vs relay)", alpha.direct_relay),
    ("provenance", "Provenance", provenance.build),
)
