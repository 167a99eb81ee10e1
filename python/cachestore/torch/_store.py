"""A store's argument list, written once, and everything made from it: the torch op's schema and
its CUDA and fake implementations, the public function (keywords, defaults, named choices), the
dispatcher-free `direct` form and `bind`.

A store is a `Store`: its `Arg`s in op order, a `prepare` that checks the tensors' metadata and
resolves what the caller left open (page sizes, defaults that depend on other arguments), and a
`build` that fills the C params from the resolved arguments. `prepare` reads metadata only, so
it runs on fake tensors too.
"""
import inspect
import types
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
    prepare: Callable  # (a: SimpleNamespace of the arguments) -> None; may set resolved values
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

    def signature(self):
        params = []
        for a in self.args:
            kind = (inspect.Parameter.KEYWORD_ONLY if a.keyword
                    else inspect.Parameter.POSITIONAL_OR_KEYWORD)
            params.append(inspect.Parameter(a.name, kind, default=a.default))
        return inspect.Signature(params)

    def resolve(self, args, kwargs):
        """The public call's arguments, bound, named choices converted, then prepared."""
        bound = self._signature.bind(*args, **kwargs)
        bound.apply_defaults()
        a = types.SimpleNamespace(**bound.arguments)
        for arg in self._choices:
            value = getattr(a, arg.name)
            if value is None:
                continue
            if value not in arg.choices:
                raise ValueError(f"{arg.name} = {value!r}: expected one of {sorted(arg.choices)}")
            setattr(a, arg.name, arg.choices[value])
        self.prepare(a)
        return a

    def op_values(self, a):
        return [getattr(a, arg.name) for arg in self.args]

    def register(self):
        """Defines torch.ops.cachestore.<name> (CUDA only: a direct call with CPU tensors is
        refused by the dispatcher instead of passing host pointers to a kernel) and its fake."""
        self._signature = self.signature()
        self._choices = [a for a in self.args if a.choices is not None]
        names = [a.name for a in self.args]
        _LIB.define(self.name + self.schema())

        def cuda_impl(*values):
            launch(*self.build(types.SimpleNamespace(**dict(zip(names, values)))))

        _LIB.impl(self.name, cuda_impl, "CUDA")
        torch.library.register_fake(f"cachestore::{self.name}", lib=_LIB)(
            lambda *values: None)
        self.op = getattr(torch.ops.cachestore, self.name)
        return self

    def function(self, way):
        """The public function of this store: `way` 'op' (through the dispatcher: traceable by
        torch.compile) or 'direct' (the C call without the dispatcher)."""
        if way == "op":
            def store(*args, **kwargs):
                return self.op(*self.op_values(self.resolve(args, kwargs)))
        else:
            def store(*args, **kwargs):
                launch(*self.build(self.resolve(args, kwargs)))
        store.__name__ = store.__qualname__ = self.name
        store.__doc__ = self.doc
        store.__signature__ = self._signature
        return store


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
