"""A store's argument list, written once, and everything made from it: the torch op's schema and
its CUDA and fake implementations, the public function (keywords, defaults, named choices), the
dispatcher-free `direct` form and `bind`.

A store is a `Store`: its `Arg`s in op order, a `prepare` that checks the tensors' metadata and
resolves what the caller left open (page sizes, defaults that depend on other arguments), and a
`build` that fills the C params from the resolved arguments. `prepare` reads metadata only, so
it runs on fake tensors too.
"""
import inspect
from dataclasses import dataclass, field
from typing import Callable, Optional

import torch

_REQUIRED = inspect.Parameter.empty
_LIB = torch.library.Library("cachestore", "DEF")


@dataclass(frozen=True)
class Arg:
    """One argument: `op_type` is its type in the op schema (Tensor, Tensor?, int, bool, str); a
    public value is converted through `choices` (name -> op value) when it has them; `mutated`
    tensors are written by the store; `keyword` arguments are keyword-only in the public
    function."""
    name: str
    op_type: str
    default: object = _REQUIRED
    choices: Optional[dict] = None
    mutated: bool = False
    keyword: bool = False


# The options every store takes after its tensors (the guard's count, the slot mapping's options,
# the diagnostics and PDL); `sharded` stores take the page-owner options too.
def batch_options(sharded=True):
    args = [Arg("num_tokens_non_padded", "Tensor?", None, keyword=True),
            Arg("reserved_slot", "int", -1, keyword=True)]
    if sharded:
        args += [Arg("owner_rank", "int", 0, keyword=True),
                 Arg("owner_size", "int", 1, keyword=True)]
    return args + [Arg("diagnostics", "Tensor?", None, mutated=True, keyword=True),
                   Arg("enable_pdl", "bool", False, keyword=True)]


@dataclass
class Store:
    name: str
    args: list
    prepare: Callable  # (a: the arguments as attributes) -> None; may set resolved values
    build: Callable    # (a) -> (C function, params, a tensor on the launch device)
    doc: str = ""
    op: object = field(default=None, init=False)

    def schema(self):
        """The op schema: mutated tensors marked (Tensor(a!)), nothing returned."""
        parts, alias = [], iter("abcdefghijklmnopqrstuvwxyz")
        for a in self.args:
            t = a.op_type
            if a.mutated:
                t = f"Tensor({next(alias)}!)" + ("?" if t.endswith("?") else "")
            parts.append(f"{t} {a.name}")
        return f"({', '.join(parts)}) -> ()"

    def _source(self, name, tail):
        """A function with the store's own signature (explicit parameters, so that it is fast and
        torch.compile traces it): named choices converted, the arguments prepared, then `tail`."""
        params, keyword_started = [], False
        for arg in self.args:
            if arg.keyword and not keyword_started:
                params.append("*")
                keyword_started = True
            params.append(arg.name if arg.default is _REQUIRED else f"{arg.name}=_d_{arg.name}")
        lines = [f"def {name}({', '.join(params)}):"]
        for arg in self.args:
            if arg.choices is not None:
                lines += [f"    if {arg.name} is not None:",
                          f"        if {arg.name} not in _c_{arg.name}:",
                          f"            raise ValueError(f\"{arg.name} = {{{arg.name}!r}}: "
                          f"expected one of {sorted(arg.choices)}\")",
                          f"        {arg.name} = _c_{arg.name}[{arg.name}]"]
        names = ", ".join(a.name for a in self.args)
        lines += [f"    a = _Args({names})", "    _prepare(a)", f"    {tail}"]
        return "\n".join(lines)

    def _compile(self, name, tail, env):
        env = dict(env, _Args=self._args_class, _prepare=self.prepare)
        for arg in self.args:
            env[f"_d_{arg.name}"] = arg.default
            env[f"_c_{arg.name}"] = arg.choices
        exec(self._source(name, tail), env)  # noqa: S102 - source built from the table above
        fn = env[name]
        fn.__qualname__ = name
        fn.__doc__ = self.doc
        return fn

    def register(self):
        """Defines torch.ops.cachestore.<name> (CUDA only: a direct call with CPU tensors is
        refused by the dispatcher instead of passing host pointers to a kernel) and its fake, and
        makes the functions of this store."""
        names = [a.name for a in self.args]
        init = "\n".join([f"def __init__(self, {', '.join(names)}):"] +
                          [f"    self.{n} = {n}" for n in names])
        env = {}
        exec(init, env)  # noqa: S102 - the argument names of the table
        self._args_class = type(f"{self.name}_args", (), {"__init__": env["__init__"]})
        _LIB.define(self.name + self.schema())

        def cuda_impl(*values):
            launch(*self.build(self._args_class(*values)))

        _LIB.impl(self.name, cuda_impl, "CUDA")
        torch.library.register_fake(f"cachestore::{self.name}", lib=_LIB)(
            lambda *values: None)
        self.op = getattr(torch.ops.cachestore, self.name)
        op_call = ", ".join(f"a.{n}" for n in names)
        self.resolve = self._compile(self.name, "return a", {})
        self._functions = {
            "op": self._compile(self.name, f"return _op({op_call})", {"_op": self.op}),
            "direct": self._compile(self.name, "_launch(*_build(a))",
                                    {"_launch": launch, "_build": self.build}),
        }
        return self

    def function(self, way):
        """The public function of this store: `way` 'op' (through the dispatcher: traceable by
        torch.compile) or 'direct' (the C call without the dispatcher)."""
        return self._functions[way]


# ---- launching ----------------------------------------------------------------------------------
try:  # the raw handle without a Stream object (what torch's own compiled kernels use)
    _raw_stream = torch._C._cuda_getCurrentRawStream
    _current_device = torch._C._cuda_getDevice
except AttributeError:  # pragma: no cover - other torch builds
    def _raw_stream(index):
        return torch.cuda.current_stream(index).cuda_stream

    _current_device = torch.cuda.current_device


def launch(fn, params, tensor):
    """The C call on `tensor`'s device and its current torch stream."""
    index = tensor.get_device()
    if index != _current_device():
        with torch.cuda.device(index):
            fn(params, _raw_stream(index))
    else:
        fn(params, _raw_stream(index))
