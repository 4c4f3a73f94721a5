#!/usr/bin/env python3
"""PyTorch conformance: runs the original ParallelKernelBench reference (PyTorch) on the very inputs
pkb dumped, and writes its outputs as a pkb artifact directory, so that `pkb compare` can check
pkb's baseline against PKB's own code rank by rank, tensor by tensor (docs/conformance.md).

    torchrun --standalone --nproc_per_node W tools/conformance.py --pkb .pkb \
        --problem-dir problems/1_allreduce --dump A --out B [--time] [--iters 100]

For every A/trial_<t>/rank_<r>.safetensors (written by `pkb run <id> --dump A`), rank r:
  1. loads its file (input.<name>, output.<name>, metadata with param.<VAR> for every variable);
  2. imports the problem's torch_adapter.py and the upstream module <pkb>/<UPSTREAM>;
  3. calls solution(*make_args(private copies of the inputs, ctx)), synchronizes, and converts the
     result with to_outputs(result, inputs, ctx);
  4. writes B/trial_<t>/rank_<r>.safetensors: the inputs as it fed them, the outputs cast to the
     dumped output's dtype, and the dump's metadata with side = "pytorch".
With --time it then times solution() the way pkb times a baseline (timing_method() below) and rank 0
writes B/timing.json. Every error names the problem, rank and tensor, and exits non-zero; no rank
waits forever (a timeout on the process group, and torchrun stops the other ranks).
"""

import argparse
import ctypes
import datetime
import importlib.util
import os
import re
import sys
import threading
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)
import pkb_safetensors as st  # noqa: E402

torch = None  # imported in main(), after the arguments are checked: --help works without PyTorch
dist = None


class ConformanceError(Exception):
    """A failure whose message already says which problem, rank, trial and tensor."""


# ----------------------------------------------------------------------------------------------
# Arguments and the dump directory (no PyTorch needed)
# ----------------------------------------------------------------------------------------------

def parse_args(argv=None):
    p = argparse.ArgumentParser(
        prog="conformance.py",
        description="Run PKB's PyTorch reference on pkb's dumped inputs and write its outputs as a "
                    "pkb artifact directory (launch with torchrun, one process per rank).",
        epilog="Example: torchrun --standalone --nproc_per_node 2 tools/conformance.py --pkb .pkb "
               "--problem-dir problems/1_allreduce --dump A --out B --time")
    p.add_argument("--pkb", required=True, help="a ParallelKernelBench checkout (holds reference/ and utils/)")
    p.add_argument("--problem-dir", required=True, help="problems/<id>_<name>, holding torch_adapter.py")
    p.add_argument("--dump", required=True, help="artifact directory from `pkb run <id> --dump DIR`")
    p.add_argument("--out", required=True, help="where to write trial_<t>/rank_<r>.safetensors (and timing.json)")
    p.add_argument("--time", action="store_true", help="also time solution() as pkb times a baseline")
    p.add_argument("--iters", type=int, default=100, help="timed calls (default 100, as pkb)")
    p.add_argument("--warmup", type=int, default=500,
                   help="at most this many warm-up calls, cut to about --warmup-budget-ms (default 500)")
    p.add_argument("--warmup-budget-ms", type=float, default=2000.0, help="warm-up time budget (default 2000)")
    p.add_argument("--predelay-us", type=float, default=20.0,
                   help="GPU-side delay after the pre-call barrier (default 20, as pkb)")
    p.add_argument("--timeout", type=float, default=600.0,
                   help="seconds before a rank gives up on the others (process group timeout; default 600)")
    p.add_argument("--io", choices=["auto", "builtin", "safetensors"], default="auto",
                   help="safetensors reader/writer: the `safetensors` package if importable (auto), "
                        "or the built-in one (tools/pkb_safetensors.py)")
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                   help="cpu runs on the gloo backend: only to try the tool without a GPU (no --time)")
    p.add_argument("--oversubscribe", action="store_true",
                   help="more ranks than GPUs: rank r on GPU local_rank %% visible, each rank its own NCCL host "
                        "(socket transport), as pkb --oversubscribe; agreement is meaningful, times are not")
    a = p.parse_args(argv)
    if a.iters < 1 or a.warmup < 0:
        p.error("--iters must be at least 1 and --warmup at least 0")
    if a.time and a.device != "cuda":
        p.error("--time needs --device cuda (CUDA events)")
    return a


def find_trials(dump_dir):
    """[(t, directory)] for every trial_<t> under dump_dir, in trial order."""
    if not os.path.isdir(dump_dir):
        raise ConformanceError(f"--dump {dump_dir} is not a directory (make one with `pkb run <id> --dump DIR`)")
    trials = []
    for name in os.listdir(dump_dir):
        m = re.fullmatch(r"trial_(\d+)", name)
        if m and os.path.isdir(os.path.join(dump_dir, name)):
            trials.append((int(m.group(1)), os.path.join(dump_dir, name)))
    if not trials:
        raise ConformanceError(f"--dump {dump_dir} holds no trial_<t> directory (is it the directory given to "
                               "`pkb run --dump`?)")
    return sorted(trials)


def dist_env():
    """(rank, world, local_rank) from torchrun's environment."""
    try:
        return int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ.get("LOCAL_RANK", os.environ["RANK"]))
    except (KeyError, ValueError):
        raise ConformanceError("RANK / WORLD_SIZE are not set: launch with "
                               "`torchrun --standalone --nproc_per_node W tools/conformance.py ...`") from None


def rank_file_plan(trials, rank, world, problem):
    """Per trial: (t, path, header-only SafetensorsFile). Checks that the dump is of this problem,
    world size and rank."""
    plan = []
    for t, d in trials:
        path = os.path.join(d, f"rank_{rank}.safetensors")
        if not os.path.isfile(path):
            raise ConformanceError(f"{problem} rank {rank}: {path} is missing (was the dump made with --gpus {world}?)")
        try:
            f = st.read(path, with_data=False)
        except (OSError, st.SafetensorsError) as e:
            raise ConformanceError(f"{problem} rank {rank}: {e}") from None
        m = f.metadata
        for key, want in (("world", str(world)), ("rank", str(rank)), ("problem", problem)):
            if m.get(key) != want:
                raise ConformanceError(
                    f"{problem} rank {rank}: {path} says {key} = {m.get(key)!r}, expected {want!r} "
                    f"({'torchrun --nproc_per_node must equal the dump world size' if key == 'world' else 'wrong dump?'})")
        plan.append((t, path, f))
    return plan


def param_vars(metadata):
    """{VAR: int} from the dump's param.<VAR> metadata (sizes, W, spec params)."""
    out = {}
    for k, v in metadata.items():
        if k.startswith("param."):
            try:
                out[k[len("param."):]] = int(v)
            except ValueError:
                out[k[len("param."):]] = v
    return out


def load_module(path, name, what):
    if not os.path.isfile(path):
        raise ConformanceError(f"{what}: {path} does not exist")
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(mod)
    except Exception as e:
        raise ConformanceError(f"{what}: importing {path} failed: {type(e).__name__}: {e}\n"
                               f"{traceback.format_exc()}") from None
    return mod


def load_adapter_and_upstream(pkb, problem_dir, problem):
    """(adapter module, upstream solution function). The PKB checkout's root goes on sys.path:
    references import from `utils`."""
    adapter_path = os.path.join(problem_dir, "torch_adapter.py")
    if not os.path.isfile(adapter_path):
        raise ConformanceError(f"{problem}: no torch_adapter.py in {problem_dir} (docs/conformance.md says how to "
                               "write one)")
    adapter = load_module(adapter_path, f"pkb_torch_adapter_{problem}", f"{problem} adapter")
    for attr in ("UPSTREAM", "make_args", "to_outputs"):
        if not hasattr(adapter, attr):
            raise ConformanceError(f"{problem}: {adapter_path} does not define {attr}")
    if not os.path.isdir(pkb):
        raise ConformanceError(f"--pkb {pkb} is not a directory (git clone "
                               "https://github.com/togethercomputer/ParallelKernelBench .pkb)")
    root = os.path.abspath(pkb)
    if root not in sys.path:
        sys.path.insert(0, root)
    up_path = os.path.join(root, adapter.UPSTREAM)
    if not os.path.isfile(up_path):
        raise ConformanceError(f"{problem}: the upstream reference {up_path} (UPSTREAM in {adapter_path}) does not "
                               "exist: is --pkb a ParallelKernelBench checkout?")
    upstream = load_module(up_path, f"pkb_upstream_{problem}", f"{problem} upstream")
    if not callable(getattr(upstream, "solution", None)):
        raise ConformanceError(f"{problem}: {up_path} defines no solution()")
    return adapter, upstream.solution


# ----------------------------------------------------------------------------------------------
# Tensors: files <-> torch
# ----------------------------------------------------------------------------------------------

def torch_dtype(st_name):
    table = {
        "BF16": "bfloat16", "F16": "float16", "F32": "float32", "F64": "float64", "I8": "int8", "U8": "uint8",
        "I16": "int16", "I32": "int32", "I64": "int64", "BOOL": "bool", "U16": "uint16", "U32": "uint32",
        "U64": "uint64", "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2",
    }
    d = getattr(torch, table.get(st_name, ""), None)
    if d is None:
        raise ConformanceError(f"dtype {st_name} has no PyTorch equivalent in torch {torch.__version__}")
    return d


def raw_to_torch(raw):
    dt = torch_dtype(raw.dtype)
    if raw.numel == 0:
        return torch.empty(raw.shape, dtype=dt)
    return torch.frombuffer(bytearray(raw.data), dtype=dt).reshape(raw.shape)


def torch_to_bytes(t):
    t = t.detach().to("cpu").contiguous()
    n = t.numel() * t.element_size()
    return ctypes.string_at(t.data_ptr(), n) if n else b""


class TensorIO:
    """Reads pkb's files into CPU tensors and writes tensors back: the `safetensors` package when
    it is importable (and --io allows), else tools/pkb_safetensors.py. Either way the order of the
    tensors and the dtype names come from the file's own header."""

    def __init__(self, mode):
        self.package = None
        if mode in ("auto", "safetensors"):
            try:
                import safetensors  # noqa: F401
                import safetensors.torch
                self.package = safetensors
            except ImportError:
                if mode == "safetensors":
                    raise ConformanceError("--io safetensors: the safetensors package is not importable") from None
        self.name = "safetensors " + getattr(self.package, "__version__", "?") if self.package else "built-in"

    def load(self, path, header):
        """{name: CPU tensor} in header order."""
        if self.package:
            out = {}
            with self.package.safe_open(path, framework="pt", device="cpu") as f:
                for name in header.tensors:
                    out[name] = f.get_tensor(name)
            return out
        full = st.read(path)
        return {name: raw_to_torch(raw) for name, raw in full.tensors.items()}

    def save(self, path, tensors, st_dtypes, metadata):
        """tensors: {name: tensor} (written in this order); st_dtypes: {name: safetensors dtype}."""
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if self.package:
            cpu = {k: v.detach().to("cpu").contiguous().clone() for k, v in tensors.items()}
            self.package.torch.save_file(cpu, path, metadata=dict(metadata))
            return
        raws = [st.RawTensor(k, st_dtypes[k], list(v.shape), torch_to_bytes(v)) for k, v in tensors.items()]
        st.write(path, raws, metadata)


# ----------------------------------------------------------------------------------------------
# The context adapters see
# ----------------------------------------------------------------------------------------------

class AdapterContext:
    """What make_args / to_outputs get: rank, world, trial, vars (the spec's resolved integer
    variables: sizes, W, params), dtype (torch dtype of D), device, problem, size, and
    new_group / new_groups for sub-communicators (call them in the same order on every rank)."""

    def __init__(self, rank, world, trial, vars, dtype, device, problem, size, group_cache):
        self.rank, self.world, self.trial, self.vars = rank, world, trial, vars
        self.dtype, self.device, self.problem, self.size = dtype, device, problem, size
        self._groups = group_cache

    def new_group(self, ranks):
        """dist.new_group(ranks), made once per distinct rank tuple and cached across trials.
        Collective: every rank must call it with the same ranks, in the same order."""
        key = tuple(int(r) for r in ranks)
        if key not in self._groups:
            self._groups[key] = dist.new_group(ranks=list(key))
        return self._groups[key]

    def new_groups(self, rank_lists):
        """Makes a group for every list (same order on every rank) and returns the one that holds
        this rank (None if none does): PKB's usual `for ranks in ...: g = new_group(ranks)` loop."""
        mine = None
        for ranks in rank_lists:
            g = self.new_group(ranks)
            if self.rank in [int(r) for r in ranks]:
                mine = g
        return mine


# ----------------------------------------------------------------------------------------------
# One rank's run
# ----------------------------------------------------------------------------------------------

class Rank:
    def __init__(self, args, rank, world, local_rank, problem, plan, adapter, solution):
        self.args, self.rank, self.world, self.problem = args, rank, world, problem
        self.plan, self.adapter, self.solution = plan, adapter, solution
        self.who = f"{problem} rank {rank}"
        self.cuda = args.device == "cuda"
        self.device = torch.device("cuda", gpu_of(args, local_rank)) if self.cuda else torch.device("cpu")
        self.io = TensorIO(args.io)
        self.groups = {}
        self.pristine = {}  # trial -> {input name: device tensor}, kept for --time
        self.contexts = {}

    def sync(self):
        if self.cuda:
            torch.cuda.synchronize(self.device)

    def context(self, t, metadata):
        if t not in self.contexts:
            pkb_dtype = metadata.get("dtype", "bf16")
            dt = torch_dtype(st.PKB_TO_SAFETENSORS.get(pkb_dtype, "BF16"))
            self.contexts[t] = AdapterContext(self.rank, self.world, t, param_vars(metadata), dt, self.device,
                                              self.problem, metadata.get("size", ""), self.groups)
        return self.contexts[t]

    def call_adapter(self, what, fn, *a):
        try:
            return fn(*a)
        except ConformanceError:
            raise
        except Exception as e:
            raise ConformanceError(f"{self.who}: {what} raised {type(e).__name__}: {e}\n{traceback.format_exc()}") from None

    def run_trial(self, t, path, header):
        cpu = self.io.load(path, header)
        inputs = {k[len("input."):]: v.to(self.device) for k, v in cpu.items() if k.startswith("input.")}
        ctx = self.context(t, header.metadata)
        private = {k: v.clone() for k, v in inputs.items()}
        call_args = self.call_adapter(f"trial {t}: make_args", self.adapter.make_args, private, ctx)
        result = self.call_adapter(f"trial {t}: the upstream solution()", self.solution, *call_args)
        self.sync()
        dist.barrier()
        outs = self.call_adapter(f"trial {t}: to_outputs", self.adapter.to_outputs, result, private, ctx)
        written = self.checked_outputs(t, header, outs)
        tensors, dtypes = {}, {}
        for name, raw in header.tensors.items():
            dtypes[name] = raw.dtype
            tensors[name] = inputs[name[len("input."):]] if name.startswith("input.") else written[name]
        meta = dict(header.metadata)
        meta["side"] = "pytorch"
        out_path = os.path.join(self.args.out, f"trial_{t}", f"rank_{self.rank}.safetensors")
        self.io.save(out_path, tensors, dtypes, meta)
        if self.args.time:
            self.pristine[t] = inputs

    def checked_outputs(self, t, header, outs):
        """{output.<name>: CPU tensor of the dumped dtype}, or a ConformanceError naming the tensor."""
        want = {n[len("output."):]: raw for n, raw in header.tensors.items() if n.startswith("output.")}
        if not isinstance(outs, dict):
            raise ConformanceError(f"{self.who}: trial {t}: to_outputs returned {type(outs).__name__}, expected a "
                                   f"dict of output name -> tensor ({', '.join(want)})")
        missing = [n for n in want if n not in outs]
        extra = [n for n in outs if n not in want]
        if missing or extra:
            raise ConformanceError(f"{self.who}: trial {t}: to_outputs returned outputs {sorted(outs)}; pkb's are "
                                   f"{list(want)} (missing {missing}, unknown {extra})")
        written = {}
        for name, raw in want.items():
            v = outs[name]
            if not isinstance(v, torch.Tensor):
                raise ConformanceError(f"{self.who}: trial {t}: output '{name}': to_outputs returned "
                                       f"{type(v).__name__}, not a tensor")
            if list(v.shape) != list(raw.shape):
                raise ConformanceError(f"{self.who}: trial {t}: output '{name}': shape {list(v.shape)} from "
                                       f"to_outputs, but pkb's is {list(raw.shape)} ({raw.dtype})")
            written["output." + name] = v.detach().to(device="cpu", dtype=torch_dtype(raw.dtype))
        return written

    def run(self):
        for t, path, header in self.plan:
            self.run_trial(t, path, header)
        self.sync()
        dist.barrier()
        if self.rank == 0:
            print(f"conformance: {self.problem} W={self.world}: wrote {len(self.plan)} trial(s) to {self.args.out} "
                  f"(io: {self.io.name})", flush=True)
        if self.args.time:
            import conformance_timing
            conformance_timing.run(self)


# ----------------------------------------------------------------------------------------------
# Process group life cycle
# ----------------------------------------------------------------------------------------------

def gpu_of(args, local_rank):
    """The CUDA device a rank takes: its local rank, or with --oversubscribe local_rank % visible."""
    return local_rank % torch.cuda.device_count() if args.oversubscribe else local_rank


def emulate_own_node(rank):
    """Every rank its own NCCL host (as pkb-worker does with --oversubscribe): NCCL refuses two ranks
    of one host on one GPU, and between hosts its socket transport on loopback carries the traffic."""
    os.environ["NCCL_HOSTID"] = f"pkb-conformance-node-{rank}"
    os.environ.setdefault("NCCL_SOCKET_IFNAME", "lo")
    os.environ.setdefault("NCCL_IB_DISABLE", "1")


def init_process_group(args, local_rank):
    timeout = datetime.timedelta(seconds=args.timeout)
    if args.device == "cuda":
        if not torch.cuda.is_available():
            raise ConformanceError("no CUDA device is visible (--device cpu runs without one, for trying the tool)")
        if args.oversubscribe:
            emulate_own_node(int(os.environ.get("RANK", local_rank)))
        local_rank = gpu_of(args, local_rank)
        torch.cuda.set_device(local_rank)
        try:
            dist.init_process_group("nccl", timeout=timeout, device_id=torch.device("cuda", local_rank))
        except TypeError:  # PyTorch before 2.3: no device_id
            dist.init_process_group("nccl", timeout=timeout)
    else:
        dist.init_process_group("gloo", timeout=timeout)


def teardown(ok):
    """destroy_process_group, bounded: after a failure a peer may never answer, so the failing
    rank waits at most a few seconds and then exits (torchrun then stops the other ranks)."""
    if not dist.is_initialized():
        return
    th = threading.Thread(target=dist.destroy_process_group, daemon=True)
    th.start()
    th.join(None if ok else 10.0)


def main(argv=None):
    global torch, dist
    args = parse_args(argv)
    problem = os.path.basename(os.path.normpath(args.problem_dir))
    try:
        rank, world, local_rank = dist_env()
        plan = rank_file_plan(find_trials(args.dump), rank, world, problem)
    except ConformanceError as e:
        print(f"conformance: error: {e}", file=sys.stderr, flush=True)
        return 2
    try:
        import torch as _torch
        import torch.distributed as _dist
    except ImportError as e:
        print(f"conformance: error: PyTorch is not importable here ({e})", file=sys.stderr, flush=True)
        return 2
    torch, dist = _torch, _dist
    try:
        adapter, solution = load_adapter_and_upstream(args.pkb, args.problem_dir, problem)
        init_process_group(args, local_rank)
        Rank(args, rank, world, local_rank, problem, plan, adapter, solution).run()
    except Exception as e:  # noqa: BLE001 - every failure becomes one clear message and exit 1
        msg = str(e) if isinstance(e, ConformanceError) else f"{problem} rank {rank}: {type(e).__name__}: {e}\n" \
                                                              f"{traceback.format_exc()}"
        print(f"conformance: error: {msg}", file=sys.stderr, flush=True)
        teardown(ok=False)
        sys.stdout.flush()
        os._exit(1)
    teardown(ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
