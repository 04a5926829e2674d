"""Command line: ``tp-limits`` (also ``python -m tp_limits``).

    tp-limits classify mup --L 3                 a preset
    tp-limits classify --a "-1/2,0,1/2" --b "1/2,1/2,1/2" --c 0
    tp-limits classify sp --L 2 --c 1 --json     machine-readable
    tp-limits table --L 2                        TP4's Table 1
    tp-limits coord-check mup --L 2              finite-width coordinate check
"""
from __future__ import annotations

import argparse
import json
import sys

from .abc import ABC, table
from .abc.presets import PRESETS, mup, sp, ntp
from .errors import TPError


def _split(text: str) -> list:
    return [t.strip() for t in text.split(",") if t.strip()]


def _param_from_args(args) -> ABC:
    if args.preset:
        if args.a or args.b:
            raise TPError("give either a preset name or --a/--b, not both")
        kwargs = {}
        if args.preset in ("sp", "ntp") and args.c is not None:
            kwargs["c"] = args.c
        elif args.c is not None:
            raise TPError(f"--c applies to presets sp and ntp only, not {args.preset}")
        if args.preset == "mup":
            kwargs["form"] = args.form
            kwargs["optimizer"] = args.optimizer
        elif args.optimizer != "sgd" or args.form != "tp4":
            raise TPError("--form/--optimizer apply to the mup preset only "
                          "(use --a/--b/--c with --optimizer for others)")
        return PRESETS[args.preset](args.L, **kwargs)
    if not (args.a and args.b):
        raise TPError("give a preset (sp, ntp, mfp, mup) or both --a and --b")
    c = _split(args.c if args.c is not None else "0")
    return ABC(_split(args.a), _split(args.b), c[0] if len(c) == 1 else c,
               optimizer=args.optimizer, name=args.name or "")


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
    rng = np.random.default_rng(0)
    X = rng.standard_normal((args.steps, 2))
    Y = np.sin(X[:, :1] + X[:, 1:])
    net = MLP(param, d_in=2, d_out=1, phi=args.phi)
    routine = Routine(X, Y, lr=args.lr, eval_inputs=X[:3])
    widths = [int(w) for w in _split(args.widths)]
    cc = coord_check(net, routine, widths=widths, seeds=args.seeds, progress=True,
                     executor="serial")
    print(cc.table(t=args.steps))
    if args.plot:
        cc.plot(t=args.steps).savefig(args.plot, dpi=120)
        print(f"figure written to {args.plot}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="tp-limits", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)

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
    pk.add_argument("--widths", default="256,512,1024,2048")
    pk.add_argument("--seeds", type=int, default=4)
    pk.add_argument("--steps", type=int, default=3)
    pk.add_argument("--lr", type=float, default=0.5)
    pk.add_argument("--plot", help="write the coordinate-check figure to this PNG path")
    pk.set_defaults(func=_cmd_coord_check)
    return ap


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
    except TPError as exc:
        print(f"tp-limits: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
