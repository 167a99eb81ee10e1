"""A store's argument list, written once, and everything made from it: the torch op's schema, its
fake, its Python implementation (when the native ops are not loaded), the public function
(keywords, defaults, named choices), the dispatcher-free `direct` form and `bind`.

A store is a `Store`: its `Arg`s in op order, a `prepare` that checks the tensors' metadata and
resolves what the caller left open (page sizes, defaults that depend on other arguments), and a
`build` that fills the C params from the resolved arguments. `prepare` reads metadata only, so
it runs on fake tensors too: it is the op's fake. It takes the op's own values (choices already
converted to their ids), and says what the native op says, word for word.
"""
import inspect
import re
from dataclasses import dataclass, field
from typing import Callable, Optional

import torch

from .. import capi as c

_REQUIRED = inspect.Parameter.empty


@dataclass(frozen=True)
class Arg:
    """One argument: `op_type` is its type in the op schema (Tensor, Tensor?, int, int?, bool); a
    public value is converted through `choices` (name -> op value) when it has them, or through
    `choices[<the public value of the argument named choices_by>]`; `mutated` tensors are
    written by the store; `keyword` arguments are keyword-only in the public function. The
    op's default is the converted public default."""
    name: str
    op_type: str
    default: object = _REQUIRED
    choices: Optional[dict] = None
    choices_by: Optional[str] = None
    mutated: bool = False
    keyword: bool = False

    def op_default(self):
        if self.choices is not None and self.choices_by is None and self.default is not None:
            return self.choices[self.default]
        return self.default


# The options every store takes after its tensors (the guard's count, the slot mapping's options,
# the diagnostics and PDL); `sharded` (paged) stores take the page-owner options too and, last
# (appended, so that positional calls of earlier releases still bind), the page-table slot
# source: positions, kv_indptr, kv_indices (slot_mapping then holds the batch indices).
def batch_options(sharded=True):
    args = [Arg("num_tokens_non_padded", "Tensor?", None, keyword=True),
            Arg("reserved_slot", "int", -1, keyword=True)]
    if sharded:
        args += [Arg("owner_rank", "int", 0, keyword=True),
                 Arg("owner_size", "int", 1, keyword=True)]
    args += [Arg("diagnostics", "Tensor?", None, mutated=True, keyword=True),
             Arg("enable_pdl", "bool", False, keyword=True)]
    if sharded:
        args += [Arg("positions", "Tensor?", None, keyword=True),
                 Arg("kv_indptr", "Tensor?", None, keyword=True),
                 Arg("kv_indices", "Tensor?", None, keyword=True)]
    return args


def _schema_default(value):
    return "None" if value is None else str(value)


# ---- refusals of the native ops, as the Python exceptions cachestore.torch raises -------------
_STATUS_CODES = {name: code for code, name in c.STATUS_NAMES.items()}
_STATUS_AT_END = re.compile(r" \[(kError\w+)\]$")
_CUDA_STATUSES = ("kErrorArchMismatch", "kErrorCudaRuntime")  # op_support.cpp: RuntimeError


def typed_error(error):
    """The exception cachestore.torch raises for a native op's refusal `error` (op_support.h: a
    ValueError, "TypeError: " first for a type refusal, the status last for the library's), or
    None when `error` is not one. A torch that surfaces every C++ exception of an op as a
    RuntimeError (newer releases do) gives the same types: the words and the status decide, not
    the class, and what torch appends after the first line is dropped."""
    if type(error) not in (ValueError, RuntimeError):
        return None
    text = str(error)
    if type(error) is RuntimeError:
        if "Expected a value of type" in text:  # the dispatcher's argument parser
            return TypeError(text)
        text = text.split("\n", 1)[0]
    if text.startswith("TypeError: "):
        return TypeError(text[len("TypeError: "):])
    status = _STATUS_AT_END.search(text)
    if status and status.group(1) in _STATUS_CODES:
        name, message = status.group(1), text[:status.start()]
        if name in _CUDA_STATUSES:
            return c.CachestoreCudaError(_STATUS_CODES[name], message)
        return c.CachestoreError(_STATUS_CODES[name], message)
    if type(error) is RuntimeError and not text.startswith("CUDA error"):
        return ValueError(text)  # an op's argument refusal (op_support.cpp: value_error)
    return None


def reraise(error):
    """Raises `error` as cachestore.torch raises it (typed_error), or as it is."""
    typed = typed_error(error)
    if typed is None:
        raise error
    raise typed from None


@dataclass
class Store:
    name: str
    args: list
    prepare: Callable  # (a: the op's arguments as attributes) -> None; may set resolved values
    build: Callable    # (a) -> (C function, params, a tensor on the launch device)
    doc: str = ""
    op: object = field(default=None, init=False)

    def schema(self):
        """The op schema: every argument positional, mutated tensors marked (Tensor(a!)),
        nothing returned. The native op (src/torch/) declares the same."""
        parts, alias = [], iter("abcdefghijklmnopqrstuvwxyz")
        for a in self.args:
            t = a.op_type
            if a.mutated:
                t = f"Tensor({next(alias)}!)" + ("?" if t.endswith("?") else "")
            default = a.op_default()
            parts.append(f"{t} {a.name}" +
                         ("" if default is _REQUIRED else f"={_schema_default(default)}"))
        return f"({', '.join(parts)}) -> ()"

    def _source(self, name, tail):
        """A function with the store's own signature (explicit parameters, so that it is fast and
        torch.compile traces it): named choices converted to the op's values, then `tail`."""
        params, keyword_started = [], False
        for arg in self.args:
            if arg.keyword and not keyword_started:
                params.append("*")
                keyword_started = True
            params.append(arg.name if arg.default is _REQUIRED else f"{arg.name}=_d_{arg.name}")
        lines = [f"def {name}({', '.join(params)}):"]
        # Choices that depend on another argument's public value convert first.
        for arg in sorted((a for a in self.args if a.choices is not None),
                          key=lambda a: a.choices_by is None):
            n = arg.name
            table = f"_c_{n}" if arg.choices_by is None else \
                f"_c_{n}.get({arg.choices_by}, _no_choices)"
            lines += [f"    if {n} is not None:",
                      f"        _t = {table}",
                      f"        if {n} not in _t:",
                      f"            raise ValueError(f\"{n} = {{{n}!r}}: expected one of "
                      f"{{sorted(_t)}}\")",
                      f"        {n} = _t[{n}]"]
        lines += [f"    {line}" for line in tail]
        return "\n".join(lines)

    def _compile(self, name, tail, env):
        env = dict(env, _Args=self._args_class, _prepare=self.prepare, _no_choices={},
                   _reraise=reraise)
        for arg in self.args:
            env[f"_d_{arg.name}"] = arg.default
            env[f"_c_{arg.name}"] = arg.choices
        exec(self._source(name, tail), env)  # noqa: S102 - source built from the table above
        fn = env[name]
        fn.__qualname__ = name
        fn.__doc__ = self.doc
        return fn

    def register(self, library):
        """The op torch.ops.cachestore.<name> and the functions of this store. `library` None:
        the native op is loaded (src/torch/, C++ checks and launch); else the op is defined here
        on that torch.library.Library with this table's checks and the C call through ctypes.
        Either way the op has this table's schema, CUDA and CPU kernels (CPU tensors get the
        checks, then the device refusal) and `prepare` as its fake."""
        names = [a.name for a in self.args]
        # The op's arguments with their op defaults (the dispatcher may leave trailing defaults
        # out when it calls the fake).
        params = [a.name if a.op_default() is _REQUIRED else f"{a.name}=_d_{a.name}"
                  for a in self.args]
        init = "\n".join([f"def __init__(self, {', '.join(params)}):"] +
                          [f"    self.{n} = {n}" for n in names])
        env = {f"_d_{a.name}": a.op_default() for a in self.args}
        exec(init, env)  # noqa: S102 - the argument names of the table
        self._args_class = type(f"{self.name}_args", (), {"__init__": env["__init__"]})
        qualified = f"cachestore::{self.name}"
        if library is not None:
            library.define(self.name + self.schema())

            def impl(*values, **named):
                a = self._args_class(*values, **named)
                self.prepare(a)
                launch(*self.build(a))

            library.impl(self.name, impl, "CUDA")
            library.impl(self.name, impl, "CPU")

        def fake(*values, **named):
            self.prepare(self._args_class(*values, **named))

        torch.library.register_fake(qualified, lib=library)(fake)
        self.op = getattr(torch.ops.cachestore, self.name)
        call = f"_op({', '.join(names)})"
        self.resolve = self._compile(self.name, [f"a = _Args({', '.join(names)})",
                                                 "_prepare(a)", "return a"], {})
        self._functions = {
            "op": self._compile(self.name, [
                "try:", f"    return {call}", "except (ValueError, RuntimeError) as _e:",
                "    _reraise(_e)"], {"_op": self.op.default}),
            "direct": self._compile(self.name, [f"a = _Args({', '.join(names)})",
                                                "_prepare(a)", "_launch(*_build(a))"],
                                    {"_launch": launch, "_build": self.build}),
        }
        return self

    def function(self, way):
        """The public function of this store: `way` 'op' (through the dispatcher: traceable by
        torch.compile) or 'direct' (this table's checks and the C call, no dispatcher)."""
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
