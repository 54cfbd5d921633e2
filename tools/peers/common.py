"""What every peer module shares: the result of a peer's setup, and the BLAS probe.

A peer module (one per tbd model) exposes `setup(n, params=None, tiny=False, device="cpu",
wrap=None)`, which builds the model's network, optimizer and synthetic batch exactly as tbd's
model does and returns a dict with at least:
  step      one training step (forward, loss, backward, clipping, update); returns the loss
  nets      the modules whose parameters are the model's (their sum is asserted against tbd's)
  per_step  items one step processes, by tbd's counter names without `_per_second`:
            {"items": samples, "tokens": target tokens, ...}
  config    what the module was built with (sizes, lengths), for the results' context
`params` holds the name's parameters beyond the batch ({"len": 32}), `wrap` is applied to each
module the step calls (torch.compile in compile mode; the identity in eager mode).
"""
import ctypes
import os
import re


def identity(module):
    return module


def autocast_bf16(torch, inner):
    """A `wrap` for --math=bf16: `inner` (identity or torch.compile) applied to the network, its
    forward run under torch.autocast("cpu", dtype=torch.bfloat16), PyTorch's CPU mixed
    precision, and its floating outputs returned as f32, so that the loss outside runs in f32 as
    autocast's policy has it (tbd's graph casts the logits before its loss the same way). The
    backward and the optimizer run outside autocast, as PyTorch's AMP examples have them."""
    def to_f32(out):
        if isinstance(out, torch.Tensor):
            return out.float() if out.is_floating_point() else out
        if isinstance(out, tuple) and hasattr(out, "_fields"):  # a namedtuple (Inception's)
            return type(out)(*(to_f32(o) for o in out))
        if isinstance(out, (tuple, list)):
            return type(out)(to_f32(o) for o in out)
        if isinstance(out, dict):
            return {k: to_f32(v) for k, v in out.items()}
        return out

    def wrap(module):
        f = inner(module)

        def forward(*args, **kwargs):
            with torch.autocast("cpu", dtype=torch.bfloat16):
                out = f(*args, **kwargs)
            return to_f32(out)
        return forward
    return wrap


def count_params(nets):
    return sum(p.numel() for net in nets for p in net.parameters())


def only_params(model, params, allowed):
    """Raises ValueError naming a name parameter the peer does not take."""
    extra = sorted(set(params or {}) - set(allowed))
    if extra:
        raise ValueError(f"{model}: no peer for the parameter(s) {', '.join(extra)} "
                         f"(it takes {', '.join(allowed) or 'none'})")


def blas_info(torch, threads):
    """The BLAS library this process loaded (torch's matrix products go there), what it is,
    and, for OpenBLAS, its build config and thread count after setting it to `threads`.
    Debian's torch is built against the generic BLAS interface and gets whichever libblas.so.3
    the alternatives system points at: without an optimized one (libopenblas0-*) that is the
    reference (netlib) BLAS, several times slower on every Linear and RNN. PyPI's wheels carry
    MKL inside libtorch_cpu (BLAS_INFO=mkl), which /proc/self/maps does not show as a file."""
    m = re.search(r"BLAS_INFO=([^,\s]+)", torch.__config__.show())
    info = {"torch_build": m.group(1) if m else "unknown", "kind": "unknown", "library": None}
    if info["torch_build"] == "mkl":
        info["kind"] = "MKL (linked into torch)"
    libs = []
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 6 and re.match(r"lib(open)?blas|libmkl_rt|libblis|lib[st]atlas",
                                                os.path.basename(parts[5])):
                    path = os.path.realpath(parts[5])
                    if path not in libs:
                        libs.append(path)
    except OSError:  # not Linux: the library stays unknown
        pass
    if not libs:
        return info
    info["library"] = libs[0] if len(libs) == 1 else libs
    low = " ".join(libs).lower()
    if "openblas" in low:
        info["kind"] = "OpenBLAS"
        try:
            lib = ctypes.CDLL(libs[0])
            lib.openblas_get_config.restype = ctypes.c_char_p
            lib.openblas_set_num_threads(ctypes.c_int(threads))
            info["config"] = lib.openblas_get_config().decode()
            info["threads"] = lib.openblas_get_num_threads()
            info["kind"] += " (OpenMP)" if "USE_OPENMP" in info["config"] else " (pthreads)"
        except (OSError, AttributeError):  # a build without these entry points
            pass
    elif "mkl" in low:
        info["kind"] = "MKL"
    elif "blis" in low:
        info["kind"] = "BLIS"
    elif "atlas" in low:
        info["kind"] = "ATLAS"
    elif "/blas/libblas" in low:
        info["kind"] = "reference BLAS (netlib, Debian libblas3)"
    return info
