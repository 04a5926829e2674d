"""CUDA C device functions from the scalar Python functions of the registries.

A nonlinearity's kernel form and an optimizer's per-coordinate rule are written
once, as Python functions of floats (elementwise.py); the Numba kernels inline
them, and :func:`device_function` translates them into CUDA C for the GPU sweep,
so neither is written a second time by hand.  The translation covers what such
functions use, and refuses anything else with a :class:`TranslationError`:

* arguments and locals are ``double``; ``h.name`` (the last argument, when the
  function takes hyperparameters) reads the named slot of a ``const double*``;
* assignments (also tuple assignments, evaluated before any target is written),
  ``return`` of one value or a tuple (written through output pointers);
* ``+ - * /``, unary ``-``, one comparison, ``a if c else b``;
* calls of :func:`~tp_limits.elementwise.where`,
  :func:`~tp_limits.elementwise.fast_tanh` (the device function :data:`FAST_TANH`),
  ``abs``, ``min``, ``max`` and the ``math``/``numpy`` functions in ``_CALLS``;
* module-level numbers of the function's module, as literals.
"""
from __future__ import annotations

import ast
import inspect
import numbers
import textwrap


class TranslationError(ValueError):
    """A scalar function uses something the CUDA translation does not cover."""


#: fastmath's branch-free tanh (elementwise.py, ≤ 4 ulp) as a device function: CUDA's own
#: tanh branches on |x|, and the warps of a sweep, whose pre-activations straddle its
#: threshold, would take both ways
FAST_TANH = r"""
__device__ __forceinline__ double fast_tanh(double x) {
    const double y = 2.0 * fmin(fabs(x), 20.0);
    const double k = floor(y * 1.4426950408889634 + 0.5);
    const double r = (y - k * 0.693145751953125) - k * 1.4286068203094173e-06;
    const double s = __longlong_as_double((long long)(k + 1023.0) << 52);
    double p = 1.0 / 6227020800.0;
    p = p * r + 1.0 / 479001600.0;  p = p * r + 1.0 / 39916800.0;
    p = p * r + 1.0 / 3628800.0;    p = p * r + 1.0 / 362880.0;
    p = p * r + 1.0 / 40320.0;      p = p * r + 1.0 / 5040.0;
    p = p * r + 1.0 / 720.0;        p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;         p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;                p = p * r + 1.0;
    const double e = (s - 1.0) + s * (p * r);
    return copysign(e / (e + 2.0), x);
}
"""

#: Python callee name (bare, or the attribute of math/np/numpy) -> C function
_CALLS = {"sqrt": "sqrt", "exp": "exp", "expm1": "expm1", "log": "log", "log1p": "log1p",
          "erf": "erf", "tanh": "tanh", "abs": "fabs", "fabs": "fabs", "max": "fmax",
          "min": "fmin", "copysign": "copysign", "fast_tanh": "fast_tanh"}
_MODULES = ("math", "np", "numpy")
_BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}
_COMPARE = {ast.Gt: ">", ast.GtE: ">=", ast.Lt: "<", ast.LtE: "<=", ast.Eq: "==",
            ast.NotEq: "!="}


def _literal(value) -> str:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TranslationError(f"only numbers can be constants, got {value!r}")
    return repr(float(value))


class _Translator:
    def __init__(self, fn, hyper):
        self.fn = fn
        self.globals = fn.__globals__
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
        self.node = tree.body[0]
        if not isinstance(self.node, ast.FunctionDef):
            raise TranslationError(f"{fn.__name__}: not a function definition")
        args = [a.arg for a in self.node.args.args]
        self.hyper = None
        if hyper is not None:
            self.hyper, args = args[-1], args[:-1]
            self.hyper_names = tuple(hyper)
        self.args = args
        self.declared = set(args)
        self.outputs = None

    def fail(self, node, what):
        raise TranslationError(f"{self.fn.__name__}, line {getattr(node, 'lineno', '?')}: "
                               f"{what} is not covered by the CUDA translation")

    # -- expressions ----------------------------------------------------------------------
    def expr(self, e) -> str:
        if isinstance(e, ast.Constant):
            return _literal(e.value)
        if isinstance(e, ast.Name):
            if e.id in self.declared:
                return e.id
            if e.id in self.globals:
                return _literal(self.globals[e.id])
            self.fail(e, f"the name {e.id!r}")
        if isinstance(e, ast.Attribute):
            if isinstance(e.value, ast.Name) and e.value.id == self.hyper:
                if e.attr not in self.hyper_names:
                    self.fail(e, f"the hyperparameter {e.attr!r} (not in the layout)")
                return e.attr
            self.fail(e, "this attribute")
        if isinstance(e, ast.BinOp) and type(e.op) in _BINOPS:
            return f"({self.expr(e.left)} {_BINOPS[type(e.op)]} {self.expr(e.right)})"
        if isinstance(e, ast.UnaryOp) and isinstance(e.op, (ast.USub, ast.UAdd)):
            return f"({'-' if isinstance(e.op, ast.USub) else '+'}{self.expr(e.operand)})"
        if isinstance(e, ast.Compare) and len(e.ops) == 1 and type(e.ops[0]) in _COMPARE:
            return (f"({self.expr(e.left)} {_COMPARE[type(e.ops[0])]} "
                    f"{self.expr(e.comparators[0])})")
        if isinstance(e, ast.IfExp):
            return f"({self.expr(e.test)} ? {self.expr(e.body)} : {self.expr(e.orelse)})"
        if isinstance(e, ast.Call) and not e.keywords:
            return self.call(e)
        self.fail(e, type(e).__name__)

    def call(self, e) -> str:
        f = e.func
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) \
                and f.value.id in _MODULES:
            name = f.attr
        elif isinstance(f, ast.Name):
            name = f.id
        else:
            self.fail(e, "this call")
        args = [self.expr(a) for a in e.args]
        if name == "where":
            if len(args) != 3:
                self.fail(e, "where() without three arguments")
            return f"({args[0]} ? {args[1]} : {args[2]})"
        if name not in _CALLS:
            self.fail(e, f"the function {name!r}")
        return f"{_CALLS[name]}({', '.join(args)})"

    # -- statements -----------------------------------------------------------------------
    def assign(self, names, values, lines):
        """Targets written after every value is computed (Python's tuple assignment)."""
        if len(names) == 1:
            lines.append(self.store(names[0], values[0]))
            return
        temps = []
        for k, v in enumerate(values):
            temps.append(f"_t{len(lines)}_{k}")
            lines.append(f"const double {temps[-1]} = {v};")
        lines += [self.store(n, t) for n, t in zip(names, temps)]

    def store(self, name, value) -> str:
        if name in self.declared:
            return f"{name} = {value};"
        self.declared.add(name)
        return f"double {name} = {value};"

    def statement(self, s, lines):
        if isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant):
            return                                        # the docstring
        if isinstance(s, ast.Assign) and len(s.targets) == 1:
            t, v = s.targets[0], s.value
            if isinstance(t, ast.Name):
                self.assign([t.id], [self.expr(v)], lines)
                return
            if isinstance(t, ast.Tuple) and isinstance(v, ast.Tuple) and \
                    len(t.elts) == len(v.elts) and all(isinstance(x, ast.Name) for x in t.elts):
                self.assign([x.id for x in t.elts], [self.expr(x) for x in v.elts], lines)
                return
        if isinstance(s, ast.AugAssign) and isinstance(s.target, ast.Name) and \
                type(s.op) in _BINOPS and s.target.id in self.declared:
            lines.append(f"{s.target.id} {_BINOPS[type(s.op)]}= {self.expr(s.value)};")
            return
        if isinstance(s, ast.Return) and s.value is not None:
            vals = s.value.elts if isinstance(s.value, ast.Tuple) else [s.value]
            if self.outputs is not None and self.outputs != len(vals):
                self.fail(s, "returns of different lengths")
            self.outputs = len(vals)
            lines += [f"*out{k} = {self.expr(v)};" for k, v in enumerate(vals)]
            lines.append("return;")
            return
        self.fail(s, type(s).__name__)

    def source(self, name) -> str:
        lines = []
        if self.hyper is not None:
            lines += [f"const double {n} = {self.hyper}[{i}];"
                      for i, n in enumerate(self.hyper_names)]
            self.declared.update(self.hyper_names)
        for s in self.node.body:
            self.statement(s, lines)
        if self.outputs is None:
            self.fail(self.node, "a function without a return")
        params = [f"double {a}" for a in self.args]
        if self.hyper is not None:
            params.append(f"const double* {self.hyper}")
        params += [f"double* out{k}" for k in range(self.outputs)]
        body = "".join(f"    {line}\n" for line in lines)
        return (f"__device__ __forceinline__ void {name}({', '.join(params)}) {{\n"
                f"{body}}}\n")


def device_function(fn, name: str, hyper=None) -> str:
    """CUDA source of ``name(args..., [const double* h,] double* out0, ...)`` computing
    what ``fn`` returns.  ``hyper``: the names of the fields of ``fn``'s last argument,
    in the order of the array passed for it (the layout of an optimizer's
    hyperparameters), or None when ``fn`` takes no hyperparameters."""
    return _Translator(fn, hyper).source(name)


def outputs(fn, hyper=None) -> int:
    """How many values ``fn`` returns (the output pointers of its device function)."""
    t = _Translator(fn, hyper)
    t.source("f")
    return t.outputs
