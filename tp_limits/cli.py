"""Command line: ``tp-limits`` (also ``python -m tp_limits``).

    tp-limits classify mup --L 3                 a preset
    tp-limits classify --a "-1/2,0,1/2" --b "1/2,1/2,1/2" --c 0
    tp-limits classify sp --L 2 --c 1 --json     machine-readable
    tp-limits table --L 2                        TP4's Table 1
    tp-limits coord-check mup --L 2              finite-width coordinate check
    tp-limits demo [--out DIR]                   the built-in experiment (main job)
    tp-limits run experiment.toml [--out DIR]    a user's experiment file
    tp-limits sweep experiment.toml [--out DIR]  its [sweep]: learning rates at each width and ∞

Errors are one line on stderr with exit status 2; Ctrl-C ends a run within
seconds, writes what had finished (its summary says PARTIAL) and exits 130.
Output piped into a reader that stops early (``| head``) ends quietly.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

from ._version import __version__
from .abc import ABC, table
from .abc.presets import PRESETS, from_options, mup, ntp, sp
from .errors import DivergenceError, SpecError, TPError


def _split(text: str) -> list:
    return [t.strip() for t in text.split(",") if t.strip()]


def _param_from_args(args) -> ABC:
    c = None if args.c is None else _split(args.c)
    if c is not None and len(c) == 1:
        c = c[0]
    return from_options(args.preset, args.L, args.a and _split(args.a),
                        args.b and _split(args.b), c, args.form, args.optimizer,
                        args.name or "")


def _cmd_classify(args) -> int:
    k = _param_from_args(args).classify()
    print(json.dumps(k.to_dict(), indent=2) if args.json else k)
    return 0


def _cmd_table(args) -> int:
    L = args.L
    t = table([sp(L), sp(L, c=1), ntp(L), mup(L), mup(L, form="a0")])
    print(t.markdown() if args.format == "markdown" else t.text())
    return 0


def _cmd_coord_check(args) -> int:
    import numpy as np

    from .analysis.coord_check import coord_check
    from .spec import MLP, Routine

    param = _param_from_args(args)
    if args.plot:
        _check_writable_file(args.plot, "--plot")
    if args.steps < 1:
        raise SpecError(f"--steps {args.steps}: the coordinate check needs at least one "
                        "training step")
    rng = np.random.default_rng(0)
    X = rng.standard_normal((args.steps, 2))
    Y = np.sin(X[:, :1] + X[:, 1:])
    net = MLP(param, d_in=2, d_out=1, phi=args.phi)
    routine = Routine(X, Y, lr=args.lr, eval_inputs=X[:3])
    cc = coord_check(net, routine, widths=args.widths, seeds=args.seeds, progress=True,
                     executor="serial")
    print(cc.table(t=args.steps))
    if args.plot:
        cc.plot(t=args.steps).savefig(args.plot, dpi=120)
        print(f"figure written to {args.plot}")
    return 0


def _check_writable_file(path: str, option: str) -> None:
    """Refuse, before any work, a path whose folder does not exist or that is a folder."""
    import os
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise TPError(f"{option} {path} is a folder; give a file name")
    if not os.path.isdir(folder):
        raise TPError(f"{option} {path}: the folder {folder} does not exist")


def _run_experiment(exp, out: str, executor, force: bool = False) -> int:
    from .experiment import console_table, run, write_report
    from .experiment.output import check_output_folder, claimed_output

    check_output_folder(out, force)
    print(f"{exp.name}\n  {exp.net.param.label}, L = {exp.net.L}, phi = {exp.net.phi}; "
          f"{exp.routine.steps} steps; limit: {exp.limit['particles']:,} particles x "
          f"{exp.limit['replicates']} replicates"
          + (f"; finite: widths {list(exp.finite['widths'])} x {exp.finite['seeds']} seeds"
             if exp.finite else "") + f"\n  {_estimate_line(exp, ('limit', 'finite'))}")
    with claimed_output(out):
        res = run(exp, progress=True, executor=executor)
        files = write_report(res, out, force=force)
    if not res.complete:
        print(f"tp-limits: interrupted {res.interrupted}; wrote the PARTIAL result "
              f"({len(files)} files) to {out}/", file=sys.stderr)
        return 130
    print(console_table(res))
    print(f"wrote {len(files)} files to {out}/ (summary.md, figures/, trajectories/)")
    return 0


def _estimate_line(exp, parts) -> str:
    """'estimated 2 min on two cores (limit 40 s, finite 1 min)': the engines' cost models,
    summed over the runs of ``parts`` (docs/performance.md, "Time estimates")."""
    from .engine.progress import duration
    priced = {p: exp.estimate[p] for p in parts if p in exp.estimate}
    total = sum(priced.values())
    split = ", ".join(f"{p} {duration(t)}" for p, t in priced.items())
    return (f"estimated {duration(total)} on two cores"
            + (f" ({split})" if len(priced) > 1 else ""))


def _cmd_demo(args) -> int:
    from .experiment import build, demo_config

    exp = build(demo_config(), source="built-in demo")
    return _run_experiment(exp, args.out, "serial" if args.serial else None, args.force)


def _cmd_run(args) -> int:
    from .experiment import load, schema_markdown
    from .experiment.runner import require_limit

    if args.schema:
        print(schema_markdown())
        return 0
    if args.config is None:
        raise TPError("give an experiment file: tp-limits run experiment.toml")
    exp = load(args.config)
    if args.check:
        k = require_limit(exp)
        print(f"{args.config}: valid ({exp.net.param.label}, L = {exp.net.L}, {k.regime}); "
              f"{_estimate_line(exp, ('limit', 'finite'))}")
        return 0
    return _run_experiment(exp, args.out, "serial" if args.serial else None, args.force)


def _cmd_sweep(args) -> int:
    from .experiment import load, run_sweep, write_sweep_report
    from .experiment.output import check_output_folder, claimed_output

    exp = load(args.config)
    if not exp.sweep:
        raise TPError(f"{args.config} has no [sweep] section (give sweep.lrs = [...])")
    check_output_folder(args.out, args.force)
    labels = ", ".join(n.param.label for n in (exp.net, *exp.compared))
    if args.check:
        print(f"{args.config}: valid sweep ({labels}; {len(exp.sweep['lrs'])} learning "
              f"rates, widths {list(exp.sweep['widths'])}, metric {exp.sweep['metric']}); "
              f"{_estimate_line(exp, ('sweep',))}")
        return 0
    s = exp.sweep
    print(f"{exp.name}\n  {labels}, L = {exp.net.L}, phi = {exp.net.phi}; "
          f"{len(s['lrs'])} learning rates x widths {list(s['widths'])} x {s['seeds']} seeds"
          + (" + the limit" if s["limit"] else "") + f"\n  {_estimate_line(exp, ('sweep',))}")
    with claimed_output(args.out):
        res = run_sweep(exp, progress=True, executor="serial" if args.serial else None)
        files = write_sweep_report(res, args.out, force=args.force)
    if not res.complete:
        print(f"tp-limits: interrupted; wrote the PARTIAL sweep ({len(files)} files) to "
              f"{args.out}/", file=sys.stderr)
        return 130
    for sw in res.sweeps:
        print((f"{sw.label}\n" if len(res.sweeps) > 1 else "") + sw.table().text())
    print(f"wrote {len(files)} files to {args.out}/ (summary.md, records.csv, figures/)")
    return 0


def _cmd_adapt(args) -> int:
    from .experiment import load, run_adapt, write_adapt_report
    from .experiment.output import check_output_folder, claimed_output

    exp = load(args.config)
    if not exp.adapter:
        raise TPError(f"{args.config} has no [adapter] section (give adapter.eta_A and "
                      "adapter.eta_B)")
    check_output_folder(args.out, args.force)
    a = exp.adapter
    pre = a["pre"]
    line = (f"{exp.name}\n  pretrain {exp.net.param.label}, L = {exp.net.L}, phi = "
            f"{exp.net.phi}, {exp.routine.steps} steps; then LoRA (r = {pre.rank}) on the "
            f"{pre.layer} layer, {pre.optimizer}, {a['steps']} steps; limit: "
            f"{a['particles']:,} particles x {a['replicates']} replicates"
            + (f"; finite: widths {list(exp.finite['widths'])} x {exp.finite['seeds']} seeds"
               if exp.finite else ""))
    if args.check:
        print(f"{args.config}: valid adapter experiment\n{line}")
        return 0
    print(line)
    with claimed_output(args.out):
        res = run_adapt(exp, progress=True)
        files = write_adapt_report(res, args.out, force=args.force)
    if not res.complete:
        print(f"tp-limits: interrupted {res.interrupted}; wrote the PARTIAL result "
              f"({len(files)} files) to {args.out}/", file=sys.stderr)
        return 130
    print(res.table())
    print(f"wrote {len(files)} files to {args.out}/ (summary.md, runs.json, figures/)")
    return 0


def _widths(text: str) -> list:
    """--widths: comma-separated positive integers (argparse reports a bad one)."""
    try:
        out = [int(w) for w in _split(text)]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of "
                                         "integers, e.g. 256,512,1024") from None
    if len(out) < 2 or min(out) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give at least two positive widths")
    return out


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line (and exit status 2), like every other error of the CLI."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    ap = _Parser(prog="tp-limits", description=__doc__,
                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = ap.add_subparsers(dest="command", required=True, parser_class=_Parser)

    def add_param_args(p):
        p.add_argument("preset", nargs="?", choices=sorted(PRESETS), help="a named parametrization")
        p.add_argument("--L", type=int, default=1, help="number of hidden layers (presets)")
        p.add_argument("--a", help="comma-separated exponents a_1..a_{L+1}")
        p.add_argument("--b", help="comma-separated exponents b_1..b_{L+1} ('oo' allowed last)")
        p.add_argument("--c", help="learning-rate exponent: one value or L+1 comma-separated")
        p.add_argument("--form", default="tp4", choices=["tp4", "a0"], help="mup form")
        p.add_argument("--optimizer", default="sgd", choices=["sgd", "adam"])
        p.add_argument("--name", help="label for a custom parametrization")

    pc = sub.add_parser("classify", help="classify a parametrization exactly")
    add_param_args(pc)
    pc.add_argument("--json", action="store_true", help="machine-readable output")
    pc.set_defaults(func=_cmd_classify)

    pt = sub.add_parser("table", help="TP4's Table 1 for L hidden layers")
    pt.add_argument("--L", type=int, default=2)
    pt.add_argument("--format", choices=["text", "markdown"], default="text")
    pt.set_defaults(func=_cmd_table)

    pk = sub.add_parser("coord-check", help="measure width exponents of finite networks")
    add_param_args(pk)
    pk.add_argument("--phi", default="tanh")
    pk.add_argument("--widths", type=_widths, default="256,512,1024,2048")
    pk.add_argument("--seeds", type=int, default=4)
    pk.add_argument("--steps", type=int, default=3)
    pk.add_argument("--lr", type=float, default=0.5)
    pk.add_argument("--plot", help="write the coordinate-check figure to this PNG path")
    pk.set_defaults(func=_cmd_coord_check)

    pd = sub.add_parser("demo", help="the built-in experiment: muP L=2 tanh, limit vs widths")
    _add_output_args(pd, "tp_limits_demo")
    pd.set_defaults(func=_cmd_demo)

    pr = sub.add_parser("run", help="run an experiment file (TOML; see docs/cli.md)")
    pr.add_argument("config", nargs="?", help="path of the experiment .toml")
    _add_output_args(pr, "tp_limits_run")
    pr.add_argument("--check", action="store_true", help="validate only, run nothing")
    pr.add_argument("--schema", action="store_true", help="print the file schema and exit")
    pr.set_defaults(func=_cmd_run)

    ps = sub.add_parser("sweep", help="the learning-rate sweep of an experiment file's [sweep]")
    ps.add_argument("config", help="path of the experiment .toml (with a [sweep] section)")
    _add_output_args(ps, "tp_limits_sweep")
    ps.add_argument("--check", action="store_true", help="validate only, run nothing")
    ps.set_defaults(func=_cmd_sweep)

    pa = sub.add_parser("adapt", help="pretrain, then fine-tune the [adapter] of an experiment "
                                      "file, finite and in the limit")
    pa.add_argument("config", help="path of the experiment .toml (with an [adapter] section)")
    _add_output_args(pa, "tp_limits_adapt")
    pa.add_argument("--check", action="store_true", help="validate only, run nothing")
    pa.set_defaults(func=_cmd_adapt)
    return ap


def _add_output_args(parser, default_out: str) -> None:
    """The options every command that writes a folder shares."""
    parser.add_argument("--out", default=default_out, help="output folder (default %(default)s)")
    parser.add_argument("--serial", action="store_true", help="no process pool")
    parser.add_argument("--force", action="store_true",
                        help="replace the contents of a non-empty --out folder")


_VALUE_OPTIONS = ("--a", "--b", "--c")


def _glue_negative_values(argv: list) -> list:
    """``--a -1/2,0`` -> ``--a=-1/2,0``: argparse would read ``-1/2,0`` as an option."""
    out, i = [], 0
    while i < len(argv):
        if argv[i] in _VALUE_OPTIONS and i + 1 < len(argv):
            out.append(f"{argv[i]}={argv[i + 1]}")
            i += 2
        else:
            out.append(argv[i])
            i += 1
    return out


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser().parse_args(_glue_negative_values(argv))
    try:
        return args.func(args)
    except DivergenceError as exc:
        where = f"layer {exc.layer}" if exc.layer is not None else "the output"
        print(f"tp-limits: error: training diverged at step {exc.step} ({exc.quantity} of "
              f"{where} is not finite or too large); lower the learning rate (routine.lr), or "
              "check the parametrization with `tp-limits classify`", file=sys.stderr)
        return 2
    except TPError as exc:
        print(f"tp-limits: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("tp-limits: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader went away (``tp-limits table | head``): not an error of ours. Later
        # writes go to /dev/null so the interpreter's final flush cannot raise again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
