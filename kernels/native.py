"""The CPU path's C kernels: built from ``csrc/`` on first use, called through ctypes.

Decode attention is where a CPU step loses most time to memory traffic: the torch path
(``pagedlab.kernels.cpu``) gathers every sequence's blocks into a fresh tensor in every layer and
then reads them again. The C kernel reads each key and value row once, in place, through the block
table, and prefetches the rows ahead across block boundaries (``csrc/paged_attention_cpu.c``; the
same job as vLLM's ``paged_attention_v1`` in ``csrc/cpu/attention.cpp``, vLLM 0.6; later releases moved it to ``csrc/cpu/cpu_attn.cpp``). It runs on the engine's torch
threads (OpenMP: the same runtime torch uses). Beside it, ``csrc/layer_ops_cpu.c`` has the small
per-layer ops a decode step of a few dozen tokens spends more time dispatching than computing in
torch: :func:`rms_norm` and :func:`rotary_embedding` (used by
``pagedlab.model.cpu_linear.PackedDecoderLayer``) and :func:`reshape_and_cache` (the ``"cpu"``
backend's cache write), as vLLM's CPU backend has them in ``csrc/cpu/``.

The library is built once per machine with the C compiler found (``$CC``, else ``cc``, ``gcc``, ``clang``),
``-O3 -march=native`` and OpenMP where the compiler has it, into ``$PAGEDLAB_CACHE_DIR/native/``
(keyed by the source, compiler, flags and CPU; a per-user temp folder when the cache is read-only),
with its sha256 beside it, and loaded with ``ctypes`` only from a folder of this user's or root's that no
one else can write, and only while its content matches the checksum (``pagedlab.kernels.trust``); a
library that fails (planted by another user, truncated, of another build: its ELF symbols are read before
loading) is never loaded: another is built, with one warning line saying why. Where that is not possible
(no compiler, e.g. Windows without build tools; a failed build; ``PAGEDLAB_NATIVE=0``) the ``"cpu"``
path runs its torch ops instead, with the same results: :func:`load` returns None and
:func:`unavailable_reason` says why (``pagedlab doctor`` shows it).
"""

from __future__ import annotations

import _ctypes
import ctypes
import hashlib
import logging
import numbers
import operator
import os
import platform
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

import torch

from pagedlab.errors import KernelInputError
from pagedlab.kernels import trust
from pagedlab.kernels.paged_kv import PagedKV
from pagedlab.paths import default_cache_dir

__all__ = [
    "ENV_NATIVE",
    "ENV_SANITIZE",
    "SOURCES",
    "load",
    "unavailable_reason",
    "library_path",
    "library_dirs",
    "as_int32",
    "paged_decode_attention",
    "paged_prefill_attention",
    "lane_decode_attention",
    "reads",
    "writes",
    "reshape_and_cache",
    "rms_norm",
    "rotary_embedding",
]

#: ``PAGEDLAB_NATIVE=0`` turns the C kernel off (the ``"cpu"`` backend then runs its torch path).
ENV_NATIVE = "PAGEDLAB_NATIVE"
#: ``PAGEDLAB_NATIVE_SANITIZE=address,undefined`` builds the library with those sanitizers (``make asan``; the
#: process then needs the sanitizer's runtime preloaded, ``LD_PRELOAD=$(gcc -print-file-name=libasan.so)``).
ENV_SANITIZE = "PAGEDLAB_NATIVE_SANITIZE"
#: The C sources, built into one library.
CSRC = Path(__file__).with_name("csrc")
SOURCES = (CSRC / "paged_attention_cpu.c", CSRC / "layer_ops_cpu.c")
#: Limits compiled into the kernel (``MAX_GROUP``, ``MAX_HEAD_DIM`` in the source).
MAX_GROUP, MAX_HEAD_DIM = 16, 256
#: The most OpenMP threads a call may ask for; lengths and ids are int32 in the kernel.
MAX_THREADS, INT32_MAX = 4096, 2**31 - 1
# Flag sets tried in order: OpenMP threads; then OpenMP's SIMD pragmas only (one thread; Apple clang
# has no -fopenmp); then without -march=native. No FMA contraction: RoPE then rounds as torch does.
_COMMON = ["-O3", "-ffp-contract=off", "-shared", "-fPIC", "-std=c11"]
_FLAG_SETS = (["-march=native", "-fopenmp"], ["-march=native", "-fopenmp-simd"], ["-fopenmp-simd"])
_P, _I, _F = ctypes.c_void_p, ctypes.c_int64, ctypes.c_float
#: Each C function's argument types (all return an int status or None).
_SIGNATURES: dict[str, tuple[object, list[object]]] = {
    "paged_decode_attention_f32": (ctypes.c_int, [_P] * 6 + [_I] * 10 + [_F, ctypes.c_int, _P]),
    "lane_decode_attention_f32": (ctypes.c_int, [_P] * 7 + [_I] * 7 + [_F, ctypes.c_int, _P]),
    "paged_decode_attention_bf16kv": (ctypes.c_int, [_P] * 6 + [_I] * 10 + [_F, ctypes.c_int, _P]),
    "lane_decode_attention_bf16kv": (ctypes.c_int, [_P] * 7 + [_I] * 7 + [_F, ctypes.c_int, _P]),
    "paged_decode_attention_bf16": (ctypes.c_int, [_P] * 6 + [_I] * 10 + [_F, ctypes.c_int, _P]),
    "paged_prefill_attention_f32": (ctypes.c_int, [_P] * 7 + [_I] * 10 + [_F, ctypes.c_int, _P]),
    "paged_prefill_attention_bf16kv": (ctypes.c_int, [_P] * 7 + [_I] * 10 + [_F, ctypes.c_int, _P]),
    "paged_prefill_attention_bf16": (ctypes.c_int, [_P] * 7 + [_I] * 10 + [_F, ctypes.c_int, _P]),
    "reshape_and_cache_f32": (ctypes.c_int64, [_P] * 5 + [_I] * 5),
    "reshape_and_cache_bf16": (ctypes.c_int64, [_P] * 5 + [_I] * 5),
    "rms_norm_f32": (None, [_P] * 3 + [_I] * 3 + [_F]),
    "rms_norm_bf16": (None, [_P] * 3 + [_I] * 3 + [_F]),
    "rotary_embedding_f32": (None, [_P] * 4 + [_I] * 4),
    "rotary_embedding_bf16": (None, [_P] * 4 + [_I] * 4),
}
#: The dtypes of the layer ops (:func:`rms_norm`, :func:`rotary_embedding`, :func:`reshape_and_cache`): every
#: tensor of one call in one of them; bf16 computes in fp32 and rounds where torch's bf16 ops round.
LAYER_DTYPES = (torch.float32, torch.bfloat16)
#: The caches' dtypes the decode kernels read (bf16 rows are converted to fp32 as they are loaded); the
#: query may be either too: with bf16 caches a bf16 query is read and the bf16 output written by the kernel
#: itself (``paged_decode_attention_bf16``), else a bf16 query is converted to fp32 first.
KV_DTYPES = (torch.float32, torch.bfloat16)
_ERRORS = {
    -1: "out of memory for the scores buffer",
    -2: "unsupported head shape",
    -7: "a size or count out of range (its products overflow)",
}

_log = logging.getLogger(__name__)
_lock = threading.Lock()
_state: dict[str, object] = {}  # "lib": the loaded CDLL or None; "why": reason it is None


def _compiler() -> str | None:
    for name in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if name and shutil.which(name):
            return name
    return None


def _cpu_model() -> str:
    """The CPU's model name and instruction-set flags (Linux), so a library built with -march=native is
    never loaded on another CPU sharing the cache directory (a JupyterHub home on mixed nodes)."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return platform.processor()
    wanted = ("model name", "flags", "Features", "CPU part")  # x86; the last two on ARM Linux
    return "\n".join(dict.fromkeys(line for line in lines if line.startswith(wanted)))


def library_path(compiler: str, flags: list[str], directory: Path | None = None) -> Path:
    """Where the library built by ``compiler`` with ``flags`` is kept: in ``directory`` (default: the first
    of :func:`library_dirs`), named by a hash of what shapes it (sources, compiler, flags, CPU)."""
    version = subprocess.run([compiler, "--version"], capture_output=True, text=True, timeout=30).stdout
    texts = [f.read_text() for f in SOURCES]
    key = "\n".join([*texts, compiler, version, " ".join(flags + _COMMON), platform.machine(), _cpu_model()])
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return (directory or library_dirs()[0]) / f"paged_attention_cpu-{digest}.so"


def library_dirs() -> list[Path]:
    """Where libraries are looked for and built, in order: ``native/`` in the cache directory, then a
    per-user folder in the system temp directory, created 0700 (for a read-only cache, e.g. one a hub
    shares: a library an administrator built there, in root's folders, is used; otherwise each user builds
    their own). A folder another user owns or can write is never used (:mod:`pagedlab.kernels.trust`)."""
    uid = os.getuid() if hasattr(os, "getuid") else os.getpid()
    return [default_cache_dir() / "native", Path(tempfile.gettempdir()) / f"pagedlab-{uid}" / "native"]


def _flag_sets() -> tuple[list[str], ...]:
    """The flag sets to try, in order; with ``PAGEDLAB_NATIVE_SANITIZE`` (the kit's own memory-error
    tests, ``make asan``) one set only: those sanitizers (e.g. ``address,undefined``), debug info, OpenMP."""
    sanitize = os.environ.get(ENV_SANITIZE, "").strip()
    if sanitize:
        return (["-O1", "-g", "-fno-omit-frame-pointer", f"-fsanitize={sanitize}", "-fno-sanitize-recover=all",
                 "-fopenmp"],)  # fmt: skip
    return _FLAG_SETS


def _build(compiler: str) -> tuple[ctypes.CDLL | None, str, list[str]]:
    """Find a library that may be loaded (:mod:`pagedlab.kernels.trust`) or build one, and load it:
    ``(library, "", refused)`` or ``(None, why, refused)``; ``refused`` says why each library found was not
    loaded (a rebuilt library then replaces it, or a new one is built in the next folder). Folders are
    tried in order: one that is this user's and writable but holds no library yet is built in, rather than
    loading a copy left in a later folder (so an administrator's first run fills the shared cache even when
    an earlier run left a library in the temp folder)."""
    errors: list[str] = []
    refused: list[str] = []
    for flags in _flag_sets():
        try:
            paths = [library_path(compiler, flags, d) for d in library_dirs()]
            for path in paths:
                if not path.exists():
                    if not trust.private_folder(path.parent) and os.access(path.parent, os.W_OK):
                        break  # ours to build in: _compile below builds here
                    continue
                lib, problem = _open(path)
                if lib is not None:
                    return lib, "", refused
                refused.append(f"{path}: {problem}")
            lib, problem = _open(_compile(compiler, flags, paths))
            if lib is not None:
                return lib, "", refused
            errors.append(f"the library built does not load: {problem}")
        except (OSError, subprocess.SubprocessError) as e:
            errors.append(f"{type(e).__name__}: {e}")
    return None, "the C kernel did not build: " + "; ".join(errors), refused


def _open(path: Path) -> tuple[ctypes.CDLL | None, str]:
    """``path`` loaded, its functions typed: ``(library, "")``, else ``(None, why)``: checked by
    :func:`trust.library_problem` before ``dlopen``, its ELF symbols included (never loaded when it fails:
    a library of another build runs no code); a library of another format whose functions are missing once
    loaded (macOS) is closed again."""
    problem = trust.library_problem(path, _SIGNATURES)
    if problem:
        return None, problem
    try:
        lib = ctypes.CDLL(str(path))
    except OSError as e:
        return None, f"dlopen failed: {e}"
    try:
        return _bind(lib), ""
    except AttributeError as e:
        getattr(_ctypes, "dlclose", getattr(_ctypes, "FreeLibrary", id))(lib._handle)  # a rebuilt file then loads
        return None, f"another build: {e}"


def _compile(compiler: str, flags: list[str], paths: list[Path]) -> Path:
    """Compile into the first of ``paths`` whose folder is this user's (:func:`trust.private_folder`) and
    can be written; write its checksum beside it; return it.

    Raises:
        OSError: the compiler failed (its last line of errors), or no folder could be used.
    """
    unusable = []
    for path in paths:
        problem = trust.private_folder(path.parent)
        if problem:
            unusable.append(problem)
            continue
        try:
            # Built under a temporary name and renamed: concurrent first uses never load half a file.
            with tempfile.TemporaryDirectory(dir=path.parent) as tmp:
                out = Path(tmp) / path.name
                cmd = [compiler, *_COMMON, *flags, "-o", str(out), *map(str, SOURCES), "-lm"]
                done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
                if done.returncode != 0:
                    raise subprocess.SubprocessError(
                        f"{' '.join(cmd[:3])} ...: {done.stderr.strip().splitlines()[-1:]}"
                    )
                out.chmod(0o755)
                os.replace(out, path)
            trust.write_checksum(path)
            return path
        except OSError as e:  # read-only, full ...
            unusable.append(f"{path.parent}: {e.strerror or e}")
    raise OSError(f"no folder to build in ({'; '.join(unusable)})")


def _bind(lib: ctypes.CDLL) -> ctypes.CDLL:
    for name, (restype, argtypes) in _SIGNATURES.items():
        f = getattr(lib, name)
        f.restype, f.argtypes = restype, argtypes
    return lib


def load() -> ctypes.CDLL | None:
    """The kernel library, built on the first call; None where it cannot be (:func:`unavailable_reason`).

    A library found but not loaded (another user's, truncated, changed, of another build) is named in one
    warning line on the ``pagedlab.kernels.native`` logger, with what was done instead."""
    if "lib" not in _state:
        with _lock:
            if "lib" not in _state:
                lib: ctypes.CDLL | None = None
                why = ""
                refused: list[str] = []
                if os.environ.get(ENV_NATIVE, "1").strip() == "0":
                    why = f"turned off by {ENV_NATIVE}=0"
                elif (compiler := _compiler()) is None:
                    why = "no C compiler found ($CC, cc, gcc or clang)"
                else:
                    lib, why, refused = _build(compiler)
                if refused:
                    instead = f"using {lib._name}" if lib is not None else f"running the torch path ({why})"
                    _log.warning("pagedlab: C kernels: not loading %s; %s", "; ".join(refused), instead)
                _state["why"] = why
                _state["lib"] = lib
    loaded = _state["lib"]
    return loaded if isinstance(loaded, ctypes.CDLL) else None


def unavailable_reason() -> str:
    """Why :func:`load` returns None ("" when the kernel is loaded)."""
    load()
    return str(_state.get("why", ""))


def _library() -> ctypes.CDLL:
    lib = load()
    if lib is None:
        raise RuntimeError(f"the C kernels are not available: {unavailable_reason()}")
    return lib


def paged_decode_attention(
    query: torch.Tensor, kv: PagedKV, scale: float, num_threads: int | None = None, max_seq_len: int | None = None
) -> torch.Tensor:
    """``reference.paged_decode_attention``'s result, read in place by the C kernel.

    Args:
        query: fp32 or bf16 ``[num_seqs, num_q_heads, head_dim]`` on the CPU; heads contiguous (a column
            slice of a packed QKV tensor is fine); with bf16 caches a bf16 query is read by the kernel itself
            (``paged_decode_attention_bf16``), with fp32 caches it is converted to fp32 first.
        kv: fp32 or bf16 contiguous 4-D caches (both one dtype; every sum is fp32 either way), integer ``block_tables`` ``[num_seqs, max_blocks]`` / ``seq_lens``
            ``[num_seqs]`` (int32, else converted), all on the CPU.
        scale: softmax scale.
        num_threads: OpenMP threads, ``1 ..`` :data:`MAX_THREADS` (default: ``torch.get_num_threads()``).
        max_seq_len: ``max(seq_lens)`` when the caller knows it (it sizes the scores buffers; a length
            above it is refused, never read past), else computed here.
    Returns:
        ``[num_seqs, num_q_heads, head_dim]`` in the query's dtype; a sequence with ``seq_len == 0`` gets a zero row.

    Raises:
        RuntimeError: the kernel is not available (check :func:`load` first).
        KernelInputError: an input the kernel cannot read (device, dtype, rank, layout, head shape, a
            thread count or ``max_seq_len`` out of range), or a block id outside ``[0, num_blocks)`` / a
            ``seq_len`` beyond its table row, naming the sequence.
    """
    lib = _library()
    all_bf16 = _is_bf16(query) and _is_bf16(kv.key_cache)
    query, dtype = (query, torch.bfloat16) if all_bf16 else _fp32_query(query)
    num_seqs, num_q_heads, head_dim = _check(query, kv)
    key_cache, value_cache = kv.key_cache, kv.value_cache
    _tensor("block_tables", kv.block_tables, 2)
    tables, lens = as_int32("block_tables", kv.block_tables), as_int32("seq_lens", kv.seq_lens)
    threads = _count("num_threads", torch.get_num_threads() if num_threads is None else num_threads, 1, MAX_THREADS)
    if max_seq_len is None:
        max_seq_len = max(int(lens.max()), 0) if num_seqs else 0
    max_len = _count("max_seq_len", max_seq_len)
    # The scores buffers hold one row per key a sequence may read: never more than its table row holds.
    rows = min(max_len, tables.shape[1] * kv.block_size)
    out = torch.empty(num_seqs, num_q_heads, head_dim, dtype=dtype if all_bf16 else torch.float32)
    bad_seq = ctypes.c_int64(-1)
    if all_bf16:  # no conversion op around the call: the kernel reads the bf16 query and rounds its output
        kernel = lib.paged_decode_attention_bf16
    else:
        kernel = (
            lib.paged_decode_attention_bf16kv if key_cache.dtype == torch.bfloat16 else lib.paged_decode_attention_f32
        )
    status = kernel(
        out.data_ptr(), query.data_ptr(), key_cache.data_ptr(), value_cache.data_ptr(),
        tables.data_ptr(), lens.data_ptr(), num_seqs, num_q_heads, kv.num_kv_heads, head_dim,
        kv.block_size, kv.num_blocks, query.stride(0), tables.stride(0), tables.shape[1], rows, _real("scale", scale),
        threads, ctypes.byref(bad_seq),
    )  # fmt: skip
    if status != 0:
        _raise(status, bad_seq.value, kv)
    return out.to(dtype)


def paged_prefill_attention(
    query: torch.Tensor, kv: PagedKV, scale: float, num_threads: int | None = None
) -> torch.Tensor:
    """``reference.paged_prefill_attention``'s result, the keys and values read in place by the C kernel.

    Sequence ``s``'s queries are rows ``cu_seqlens_q[s]:cu_seqlens_q[s+1]`` of ``query``, at positions
    ``seq_lens[s] - q_len ..``; query ``i`` attends to keys ``0 .. seq_lens[s] - q_len + i`` (causal). Work items
    (sequence, KV head, tile of 16 queries) run on ``num_threads`` OpenMP threads; each folds the keys in 64 at a
    time with an online softmax (every sum fp32), in a per-thread scratch of a few hundred KB whatever the context.

    Args:
        query: fp32 or bf16 ``[total_q, num_q_heads, head_dim]`` on the CPU, heads contiguous (a column slice of a
            packed QKV tensor is fine); with bf16 caches a bf16 query is read by the kernel itself and the bf16
            output rounded once from fp32 (``paged_prefill_attention_bf16``), with fp32 caches it is converted to
            fp32 first.
        kv: as :func:`paged_decode_attention`, plus ``cu_seqlens_q`` (integers, ``[num_seqs + 1]``, from 0 to
            ``total_q``, never decreasing; int32, else converted); every ``q_len <= seq_len``.
        scale: softmax scale.
        num_threads: OpenMP threads, ``1 ..`` :data:`MAX_THREADS` (default: ``torch.get_num_threads()``).
    Returns:
        ``[total_q, num_q_heads, head_dim]`` in the query's dtype, contiguous.

    Raises:
        RuntimeError: the kernel is not available (check :func:`load` first).
        KernelInputError: ``cu_seqlens_q`` missing or not prefix sums of the query rows, a ``q_len`` above its
            ``seq_len``, a block id outside ``[0, num_blocks)`` or a ``seq_len`` beyond its table row (naming the
            sequence), or an input the kernel cannot read (as :func:`paged_decode_attention`).
    """
    lib = _library()
    all_bf16 = _is_bf16(query) and _is_bf16(kv.key_cache)
    query, dtype = (query, torch.bfloat16) if all_bf16 else _fp32_query(query)
    total_q, num_q_heads, head_dim = _check_heads(query, kv)
    _tensor("block_tables", kv.block_tables, 2)
    cu = as_int32("cu_seqlens_q", kv.prefill_cu_seqlens())
    num_seqs = kv.seq_lens.shape[0] if kv.seq_lens.dim() == 1 else -1
    if cu.dim() != 1 or num_seqs < 0 or cu.shape[0] != num_seqs + 1 or kv.block_tables.shape[0] != num_seqs:
        raise KernelInputError(
            f"cu_seqlens_q must be [num_seqs + 1], seq_lens [num_seqs] and block_tables [num_seqs, max_blocks]; got "
            f"{tuple(cu.shape)}, {tuple(kv.seq_lens.shape)} and {tuple(kv.block_tables.shape)}"
        )
    tables, lens = as_int32("block_tables", kv.block_tables), as_int32("seq_lens", kv.seq_lens)
    threads = _count("num_threads", torch.get_num_threads() if num_threads is None else num_threads, 1, MAX_THREADS)
    out = torch.empty(total_q, num_q_heads, head_dim, dtype=dtype if all_bf16 else torch.float32)
    bad_seq = ctypes.c_int64(-1)
    if all_bf16:
        kernel = lib.paged_prefill_attention_bf16
    else:
        bf16_kv = kv.key_cache.dtype == torch.bfloat16
        kernel = lib.paged_prefill_attention_bf16kv if bf16_kv else lib.paged_prefill_attention_f32
    status = kernel(
        out.data_ptr(), query.data_ptr(), kv.key_cache.data_ptr(), kv.value_cache.data_ptr(), tables.data_ptr(),
        lens.data_ptr(), cu.data_ptr(), num_seqs, total_q, num_q_heads, kv.num_kv_heads, head_dim, kv.block_size,
        kv.num_blocks, query.stride(0), tables.stride(0), tables.shape[1], _real("scale", scale), threads,
        ctypes.byref(bad_seq),
    )  # fmt: skip
    if status == -8:
        raise KernelInputError(
            f"cu_seqlens_q must run from 0 to the {total_q} query rows, never decreasing; got {cu.tolist()}"
        )
    if status == -9:
        seq = bad_seq.value
        raise KernelInputError(
            f"sequence {seq}: q_len={int(cu[seq + 1] - cu[seq])} query tokens but seq_len={int(lens[seq])} "
            "(the queries are the last q_len of its seq_len positions)"
        )
    if status != 0:
        _raise(status, bad_seq.value, kv)
    return out.to(dtype)


def _is_bf16(t: object) -> bool:
    return isinstance(t, torch.Tensor) and t.dtype == torch.bfloat16


def _fp32_query(query: torch.Tensor) -> tuple[torch.Tensor, torch.dtype]:
    """``(query as the kernels read it, the dtype to return)``: a bf16 query converted to fp32 (contiguous)."""
    if isinstance(query, torch.Tensor) and query.dtype == torch.bfloat16:
        return query.float(), torch.bfloat16
    return query, torch.float32


def reads(kv: PagedKV, query: torch.Tensor | None = None) -> bool:
    """Whether the C decode kernels are built and can read ``kv``'s caches (fp32 or bf16, one dtype, CPU,
    contiguous) and, when given, ``query`` (fp32 or bf16, heads contiguous). The callers run their torch path
    otherwise."""
    k, v = kv.key_cache, kv.value_cache
    ok = k.dtype == v.dtype and k.dtype in KV_DTYPES and k.device.type == "cpu" and k.is_contiguous()
    ok = ok and v.is_contiguous()
    if query is not None:
        ok = ok and query.dtype in KV_DTYPES and query.dim() == 3 and query.stride(2) == 1
        ok = ok and query.stride(1) == query.shape[2]
    return ok and load() is not None


def writes(
    key: torch.Tensor,
    value: torch.Tensor,
    key_cache: torch.Tensor,
    value_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
) -> bool:
    """Whether the C kernels are built and :func:`reshape_and_cache` can take these tensors: CPU K/V
    ``[T, Hkv, D]`` with contiguous rows, contiguous caches, all fp32 or all bf16, int64 slots (the engine's layout)."""
    dt = key.dtype
    kv_ok = dt in LAYER_DTYPES and all(t.dtype == dt and t.dim() == 3 and _rows_contiguous(t) for t in (key, value))
    caches_ok = all(c.dtype == dt and c.is_contiguous() for c in (key_cache, value_cache))
    return kv_ok and caches_ok and key.device.type == "cpu" and slot_mapping.dtype == torch.int64 and load() is not None


def lane_decode_attention(
    query: torch.Tensor, kv: PagedKV, scale: float, slots: torch.Tensor, mask: torch.Tensor
) -> torch.Tensor:
    """``pagedlab.model.attention.tiled_decode_attention``'s result, in C: attention over the lanes a
    tile-load plan chose instead of the block table (the engine runs a learner's lab 08 tile load so).

    Args:
        query, kv: as :func:`paged_decode_attention` (``kv``'s tables are not read; its ``seq_lens`` are:
            0 gives a zero row).
        slots: int64 ``[num_seqs, num_lanes]``, a lane's flat cache slot + 1, or 0 for a zero row.
        mask: bool ``[num_seqs, num_lanes]``, the lanes that attend.
    Returns:
        ``[num_seqs, num_q_heads, head_dim]`` in the query's dtype (a sequence whose lanes are all masked: a zero row).

    Raises:
        KernelInputError: as :func:`paged_decode_attention`; or an attending lane's slot outside the cache,
            naming the sequence.
    """
    lib = _library()
    query, dtype = _fp32_query(query)
    num_seqs, num_q_heads, head_dim = _check(query, kv)
    _tensor("slots", slots, 2, torch.int64)
    _tensor("mask", mask, 2, torch.bool)
    if slots.shape != mask.shape or len(slots) != num_seqs:
        raise KernelInputError(f"slots (int64) and mask (bool) must both be [{num_seqs}, lanes]; got "
                               f"{_describe(slots)} and {_describe(mask)}")  # fmt: skip
    slots, mask, lens = slots.contiguous(), mask.contiguous(), as_int32("seq_lens", kv.seq_lens)
    out = torch.empty(num_seqs, num_q_heads, head_dim)
    bad_seq = ctypes.c_int64(-1)
    bf16 = kv.key_cache.dtype == torch.bfloat16
    status = (lib.lane_decode_attention_bf16kv if bf16 else lib.lane_decode_attention_f32)(
        out.data_ptr(), query.data_ptr(), kv.key_cache.data_ptr(), kv.value_cache.data_ptr(), slots.data_ptr(),
        mask.data_ptr(), lens.data_ptr(), num_seqs, num_q_heads, kv.num_kv_heads, head_dim, slots.shape[1],
        kv.num_blocks * kv.block_size, query.stride(0), _real("scale", scale),
        _count("num_threads", torch.get_num_threads(), 1, MAX_THREADS), ctypes.byref(bad_seq),
    )  # fmt: skip
    if status == -3:
        raise KernelInputError(f"sequence {bad_seq.value}: an attending lane's slot is outside the cache")
    if status != 0:
        _raise(status, bad_seq.value, kv)
    return out.to(dtype)


def as_int32(name: str, t: torch.Tensor) -> torch.Tensor:
    """``t`` (integers, on the CPU) as a contiguous int32 tensor, as the kernel reads it (no copy when it
    already is one).

    Raises:
        KernelInputError: ``t`` is not an integer CPU tensor (a float or bool table or length would be
            truncated into another, valid-looking one), or holds a value int32 cannot (it would wrap);
            the message names the first row that does.
    """
    _tensor(name, t)
    if t.dtype.is_floating_point or t.dtype.is_complex or t.dtype == torch.bool:
        raise KernelInputError(f"{name} must hold integers (block ids, lengths), got {_describe(t)}")
    info = torch.iinfo(t.dtype)
    if (info.min < -(2**31) or info.max > INT32_MAX) and t.numel():  # int64, uint32, uint64: may not fit
        # Compared as int64 (a wider unsigned value as float64, which orders it right): a Python bound against
        # a narrower tensor would be cast to its dtype, and torch has no comparison for uint32/uint64.
        wide = t.to(torch.int64 if info.max <= 2**63 - 1 else torch.float64)
        big = (wide > INT32_MAX) | (wide < -(2**31))
        if bool(big.any()):
            row = int(big.reshape(len(t), -1).any(1).nonzero()[0])
            raise KernelInputError(f"{name} of sequence {row} holds a value outside int32: {t[row].tolist()}")
    return t.to(torch.int32).contiguous()


def _check(query: torch.Tensor, kv: PagedKV) -> tuple[int, int, int]:
    """``(num_seqs, num_q_heads, head_dim)`` of inputs the decode kernels can read, else KernelInputError."""
    num_seqs, num_q_heads, head_dim = _check_heads(query, kv)
    if kv.block_tables.dim() != 2 or kv.seq_lens.shape != (num_seqs,) or kv.block_tables.shape[0] != num_seqs:
        raise KernelInputError(f"block_tables must be [{num_seqs}, max_blocks] and seq_lens [{num_seqs}]; got "
                               f"{tuple(kv.block_tables.shape)} and {tuple(kv.seq_lens.shape)}")  # fmt: skip
    return num_seqs, num_q_heads, head_dim


def _check_heads(query: torch.Tensor, kv: PagedKV) -> tuple[int, int, int]:
    """``query``'s ``(rows, num_q_heads, head_dim)`` where the attention kernels can read it and ``kv``'s caches
    (devices, dtypes, ranks, layouts, head shapes), else KernelInputError."""
    if not isinstance(kv, PagedKV):
        raise KernelInputError(f"kv must be a pagedlab.kernels.paged_kv.PagedKV, got {type(kv).__name__}")
    both_bf16 = _is_bf16(query) and _is_bf16(kv.key_cache)  # else the query is fp32 here (a bf16 one converted)
    _tensor("query", query, 3, torch.bfloat16 if both_bf16 else torch.float32)
    for name, cache in (("key_cache", kv.key_cache), ("value_cache", kv.value_cache)):
        _tensor(name, cache, 4, kv.key_cache.dtype if _is_kv_tensor(kv.key_cache) else torch.float32)
    _tensor("seq_lens", kv.seq_lens, 1)
    key_cache, value_cache = kv.key_cache, kv.value_cache
    if not (key_cache.is_contiguous() and value_cache.is_contiguous() and key_cache.shape == value_cache.shape):
        raise KernelInputError("the C attention kernels need contiguous key and value caches of one shape")
    if kv.block_size < 1:
        raise KernelInputError(f"the cache's block_size (dim 1) must be >= 1, got {_describe(key_cache)}")
    if query.stride(2) != 1 or query.stride(1) != query.shape[2]:
        raise KernelInputError(f"query must be [num_seqs, num_q_heads, head_dim] with contiguous heads, got shape "
                               f"{tuple(query.shape)} strides {query.stride()}")  # fmt: skip
    num_seqs, num_q_heads, head_dim = query.shape
    group, rest = divmod(num_q_heads, kv.num_kv_heads) if kv.num_kv_heads else (0, 1)
    if rest or head_dim != kv.head_dim or not 1 <= group <= MAX_GROUP or not 1 <= head_dim <= MAX_HEAD_DIM:
        raise KernelInputError(
            f"the C attention kernels take num_q_heads a multiple (<= {MAX_GROUP}x) of num_kv_heads and head_dim "
            f"<= {MAX_HEAD_DIM} equal to the cache's; got {num_q_heads} query heads, {kv.num_kv_heads} KV heads, "
            f"head_dim {head_dim} (cache {kv.head_dim})"
        )
    return num_seqs, num_q_heads, head_dim


def _is_kv_tensor(t: object) -> bool:
    """``t`` is a tensor in one of :data:`KV_DTYPES`."""
    return isinstance(t, torch.Tensor) and t.dtype in KV_DTYPES


def _raise(status: int, seq: int, kv: PagedKV) -> None:
    if status == -3:
        raise KernelInputError(
            f"sequence {seq}: a block id it reads (block_tables[{seq}, :ceil(seq_len / block_size)]) is outside "
            f"[0, {kv.num_blocks})"
        )
    if status == -4:
        n = int(kv.seq_lens[seq])
        raise KernelInputError(
            f"sequence {seq}: seq_len={n} needs {-(-n // kv.block_size)} blocks but its block_tables row holds "
            f"{kv.block_tables.shape[1]}"
        )
    if status in (-5, -6):
        n = int(kv.seq_lens[seq])
        why = "is negative" if status == -6 else "is above the max_seq_len passed (it sizes the scores buffer)"
        raise KernelInputError(f"sequence {seq}: seq_len={n} {why}")
    if status == -1:
        raise MemoryError(f"the C attention kernels: {_ERRORS[-1]}")
    raise KernelInputError(f"the C attention kernels: {_ERRORS.get(status, f'error {status}')}")


# --- what every C entry point is handed: checked here, as C would trust it --------------------------------
_DTYPE_NAMES = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.int64: "int64", torch.bool: "bool"}


def _tensor(name: str, t: object, ndim: int | None = None, dtype: torch.dtype | None = None) -> None:
    """KernelInputError unless ``t`` is a tensor on the CPU (C reads its memory through a raw pointer), of
    ``ndim`` dims and ``dtype`` when given."""
    if not isinstance(t, torch.Tensor):
        raise KernelInputError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.device.type != "cpu":
        raise KernelInputError(f"the C kernels read CPU tensors; {name} is {_describe(t)}")
    if (ndim is not None and t.dim() != ndim) or (dtype is not None and t.dtype != dtype):
        kind = _DTYPE_NAMES.get(dtype, str(dtype)) if dtype else ""
        want = " ".join(w for w in (f"{ndim}-D" if ndim is not None else "", kind) if w)
        raise KernelInputError(f"{name} must be a {want} CPU tensor, got {_describe(t)}")


def _count(name: str, n: object, low: int = 0, high: int = INT32_MAX) -> int:
    """``n`` as an int in ``[low, high]`` (a Python or numpy integer; never a bool or float), else KernelInputError."""
    try:
        value = operator.index(n)  # type: ignore[arg-type]
    except TypeError:
        value = None
    if value is None or isinstance(n, bool) or not low <= value <= high:
        raise KernelInputError(f"{name} must be an integer in [{low}, {high}], got {n!r}")
    return value


def _real(name: str, x: object) -> float:
    """``x`` as a float (a real number; never a bool), else KernelInputError."""
    if isinstance(x, bool) or not isinstance(x, numbers.Real):
        raise KernelInputError(f"{name} must be a real number, got {x!r}")
    return float(x)


# --- the small per-layer ops (csrc/layer_ops_cpu.c) ------------------------------------------------
def _rows(name: str, t: torch.Tensor, ndim: int, dtype: torch.dtype | None = torch.float32) -> None:
    """KernelInputError unless ``t`` is a CPU tensor of ``ndim`` dims (and ``dtype`` when given) whose rows (all
    but the first dim) are contiguous: the layout the C ops read, a row stride apart."""
    _tensor(name, t, ndim, dtype)
    if not _rows_contiguous(t):
        raise KernelInputError(f"{name} must have contiguous rows, got strides {t.stride()}")


def _rows_contiguous(t: torch.Tensor) -> bool:
    """Whether every row ``t[i]`` is laid out contiguously (whatever the stride between rows; any row count)."""
    expected = 1
    for size, stride in zip(reversed(t.shape[1:]), reversed(t.stride()[1:])):
        if size != 1 and stride != expected:
            return False
        expected *= size
    return True


def _describe(t: object) -> str:
    return f"{t.dtype} {tuple(t.shape)} on {t.device}" if isinstance(t, torch.Tensor) else type(t).__name__


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """``weight * x / sqrt(mean(x**2, -1) + eps)`` for ``x`` ``[T, hidden]`` (HF ``LlamaRMSNorm``; the sum
    runs in another order than torch's, so the result equals it to fp32 rounding, not bit for bit).
    ``x`` and ``weight`` fp32, or both bf16 (the sums and the scaling in fp32, rounded to bf16 where HF's
    bf16 ``LlamaRMSNorm`` rounds: the scaled row, then its product with the weight)."""
    _rows("x", x, 2, None)
    _tensor("weight", weight)
    dt = _layer_dtype("x", x)
    if weight.shape != x.shape[1:] or weight.dtype != dt or not weight.is_contiguous():
        raise KernelInputError(
            f"weight must be a contiguous {_name(dt)} [{x.shape[1]}] (x's dtype), got {_describe(weight)}"
        )
    out = torch.empty(x.shape, dtype=dt)
    (_library().rms_norm_bf16 if dt == torch.bfloat16 else _library().rms_norm_f32)(
        out.data_ptr(), x.data_ptr(), weight.data_ptr(), x.shape[0], x.shape[1], x.stride(0), _real("eps", eps)
    )
    return out


def rotary_embedding(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """``pagedlab.model.llama.apply_rope(x, cos, sin)`` bit for bit, in one pass: ``x`` ``[T, heads, head_dim]``
    (heads contiguous within a token: a column slice of a packed QKV is fine), ``cos``/``sin`` contiguous
    ``[T, head_dim]``. Returns a new contiguous ``[T, heads, head_dim]``."""
    _rows("x", x, 3, None)
    t, _, d = x.shape
    dt = _layer_dtype("x", x)
    for name, table in (("cos", cos), ("sin", sin)):
        _tensor(name, table)
        if table.shape != (t, d) or table.dtype != dt or not table.is_contiguous():
            raise KernelInputError(
                f"{name} must be a contiguous {_name(dt)} [{t}, {d}] (x's dtype), got {_describe(table)}"
            )
    if d % 2:
        raise KernelInputError(f"rotary_embedding needs an even head_dim, got {d}")
    out = torch.empty(x.shape, dtype=dt)
    (_library().rotary_embedding_bf16 if dt == torch.bfloat16 else _library().rotary_embedding_f32)(
        out.data_ptr(), x.data_ptr(), cos.data_ptr(), sin.data_ptr(), t, x.shape[1], d, x.stride(0)
    )
    return out


def reshape_and_cache(
    key: torch.Tensor,
    value: torch.Tensor,
    key_cache: torch.Tensor,
    value_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
) -> None:
    """``reference.reshape_and_cache`` in one C loop: each token's K and V rows copied to its slot (-1: skipped).

    ``key``/``value`` ``[T, Hkv, D]`` fp32 with contiguous rows (views of a packed QKV are fine); the caches
    fp32 ``[blocks, block_size, Hkv, D]``, contiguous; ``slot_mapping`` int64 ``[T]``; all on the CPU.

    Raises:
        KernelInputError: another layout or device, or a slot past the cache or below -1 (naming the token;
            then nothing is written).
    """
    _rows("key", key, 3, None)
    _rows("value", value, 3, None)
    dt = _layer_dtype("key", key)
    for name, c in (("value", value), ("key_cache", key_cache), ("value_cache", value_cache)):
        _tensor(name, c, None if name == "value" else 4, dt)
    _tensor("slot_mapping", slot_mapping, 1, torch.int64)
    t, row = key.shape[0], key.shape[1] * key.shape[2]
    caches_ok = all(c.is_contiguous() and c.shape[2:] == key.shape[1:] for c in (key_cache, value_cache))
    if not caches_ok or value.shape != key.shape or key_cache.shape != value_cache.shape:
        raise KernelInputError(
            f"reshape_and_cache needs key/value [T, Hkv, D] and contiguous caches [blocks, block_size, Hkv, D] "
            f"alike; got key {_describe(key)}, value {_describe(value)}, caches {_describe(key_cache)}, "
            f"{_describe(value_cache)}"
        )
    if slot_mapping.shape != (t,) or not slot_mapping.is_contiguous():
        raise KernelInputError(f"slot_mapping must be a contiguous int64 [{t}], got {_describe(slot_mapping)}")
    num_slots = key_cache.shape[0] * key_cache.shape[1]
    write = _library().reshape_and_cache_bf16 if dt == torch.bfloat16 else _library().reshape_and_cache_f32
    status = write(
        key.data_ptr(), value.data_ptr(), key_cache.data_ptr(), value_cache.data_ptr(), slot_mapping.data_ptr(),
        t, row, key.stride(0), value.stride(0), num_slots,
    )  # fmt: skip
    if status < 0:
        bad = -1 - status
        raise KernelInputError(
            f"slot_mapping[{bad}] = {int(slot_mapping[bad])} is outside the cache's {num_slots} slots "
            f"(-1 marks padding); nothing was written"
        )


def _layer_dtype(name: str, t: torch.Tensor) -> torch.dtype:
    """``t``'s dtype if a layer op takes it (:data:`LAYER_DTYPES`), else KernelInputError."""
    if t.dtype not in LAYER_DTYPES:
        raise KernelInputError(f"{name} must be float32 or bfloat16, got {_describe(t)}")
    return t.dtype


def _name(dt: torch.dtype) -> str:
    return _DTYPE_NAMES[dt]
