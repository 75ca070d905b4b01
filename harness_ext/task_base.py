"""Base for the project's Python task classes, built by lm-eval from their YAML."""
from lm_eval.api.task import ConfigurableTask


class YamlTask(ConfigurableTask):
    """A ``ConfigurableTask`` named by ``class: !function ...`` in a task YAML: lm-eval hands
    the whole config, ``class`` entry included, which ``TaskConfig`` does not accept."""

    def __init__(self, config=None):
        config = dict(config or {})
        config.pop("class", None)
        super().__init__(config=config)
