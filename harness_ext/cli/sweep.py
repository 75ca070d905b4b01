"""``drift-eval sweep``: lm-eval tasks under several compensation settings, the model loaded
once (``drift_eval.plugin.sweep``)."""
from __future__ import annotations

from drift_eval.cli.shared import positive, whole

NAME = "sweep"
HELP = "run lm-eval tasks under several compensation settings (model loaded once)"


def add_arguments(p) -> None:
    p.add_argument("--output", required=True, help="output folder: one subfolder of lm-eval results per setting")
    p.add_argument("--settings", default="none,log:0.1,log:0.25,const:0.25",
                   help="comma-separated settings MODE[:STRENGTH] (default: none,log:0.1,log:0.25,const:0.25)")
    p.add_argument("--tasks", default="drift_french", help="lm-eval tasks or groups, comma-separated (default drift_french)")
    p.add_argument("--model-args", default="", help="hf-drift model_args without compensation, e.g. "
                   "pretrained=DIR,dtype=float32 (default: the bundled SmolLM2-135M-Instruct)")
    p.add_argument("--span", default="system", help="compensation span for every setting: system or prompt")
    p.add_argument("--limit", type=positive, default=None, help="lm-eval --limit: samples per task")
    p.add_argument("--gen-kwargs", default="", help="lm-eval --gen_kwargs, e.g. max_gen_toks=256")
    p.add_argument("--batch-size", type=whole(1), default=8, help="lm-eval batch size (default 8)")
    p.add_argument("--device", default="cpu", help="torch device (default cpu)")
    p.add_argument("--metadata", default="", help="lm-eval --metadata JSON, e.g. '{\"num_conversations\": 4}'")
    p.add_argument("--no-chat-template", action="store_true", help="do not pass --apply_chat_template (base models)")
    p.add_argument("--no-cache", action="store_true", help="do not cache answers (an interrupted setting restarts)")


def run(args) -> int:
    # deferred, start-up: drift-eval imports every command's module to read the arguments
    from drift_eval.plugin.sweep import SweepOptions, run_sweep

    run_sweep(args.output, args.settings, args.tasks, SweepOptions(
        model_args=args.model_args, limit=args.limit, gen_kwargs=args.gen_kwargs, batch_size=args.batch_size,
        device=args.device, span=args.span, apply_chat_template=not args.no_chat_template, metadata=args.metadata,
        use_cache=not args.no_cache))
    return 0


def interrupted() -> str:
    """What the interrupted-line adds: how to resume (a rerun skips the finished work)."""
    # deferred, start-up: drift-eval imports every command's module to read the arguments
    from drift_eval.plugin.sweep import RESUME

    return RESUME
