#!/usr/bin/env python3
"""CPU tests of the PyTorch conformance tool (docs/conformance.md), runnable without PyTorch or a GPU:

  - tools/pkb_safetensors.py: round trip of every dtype pkb dumps (bf16 bit patterns exact, NaN
    payloads, -0, empty and 0-d tensors), the on-disk layout, and clear errors on broken files;
  - interoperability with pkb itself: `pkb compare --inspect` reads the files this module writes,
    and `pkb compare` of two such directories agrees / finds the planted difference;
  - tools/conformance_summary.py on real `pkb compare` output and a run record;
  - --help and bad usage of tools/conformance.sh, conformance_all.sh and conformance.py.
Where the interpreter has PyTorch (gloo), conformance.py also runs end to end through
torch.distributed.run on the CPU against a stand-in PKB checkout; otherwise that case is skipped.

Environment: PKB_BIN (the pkb binary; the pkb cases are skipped without it), PKB_SOURCE_DIR (the
repository; default: two levels up).
"""

import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import unittest

SRC = os.environ.get("PKB_SOURCE_DIR") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TOOLS = os.path.join(SRC, "tools")
sys.path.insert(0, TOOLS)
import pkb_safetensors as st  # noqa: E402
import conformance_summary  # noqa: E402

PKB = os.environ.get("PKB_BIN", "")


def bf16_bits(x):
    """bf16 of a float by truncation (exact for the values used here)."""
    return struct.unpack("<I", struct.pack("<f", x))[0] >> 16


def bf16_bytes(values):
    return struct.pack(f"<{len(values)}H", *[bf16_bits(v) for v in values])


def f32_bytes(values):
    return struct.pack(f"<{len(values)}f", *values)


def put(path, data):
    with open(path, "wb" if isinstance(data, bytes) else "w") as fh:
        fh.write(data)


def get(path):
    with open(path, "rb") as fh:
        return fh.read()


def run(cmd, env=None, timeout=120):
    e = dict(os.environ)
    e.update(env or {})
    p = subprocess.run(cmd, capture_output=True, text=True, env=e, timeout=timeout)
    return p.returncode, p.stdout + p.stderr


def dump_meta(problem, world, rank, trial, dtype="bf16", **params):
    m = {"problem": problem, "world": str(world), "rank": str(rank), "trial": str(trial), "dtype": dtype,
         "size": "tiny", "seed": "00000000000000ab", "side": "solution"}
    m.update({f"param.{k}": str(v) for k, v in params.items()})
    return m


def write_allreduce_dump(root, world, trials, rows, cols, dtype="fp32", perturb=None):
    """A pkb-style dump of problem 1 (every rank: input.tensor, output.out = the sum over ranks)."""
    enc, name = (f32_bytes, "F32") if dtype == "fp32" else (bf16_bytes, "BF16")
    n = rows * cols
    for t in range(trials):
        ins = [[((r + 1) * (i + 3 * t) % 17 - 8) / 16.0 for i in range(n)] for r in range(world)]
        total = [sum(col) for col in zip(*ins)]
        for r in range(world):
            out = list(total)
            if perturb == (t, r):
                out[5] += 1.0
            tensors = [st.RawTensor("input.tensor", name, [rows, cols], enc(ins[r])),
                       st.RawTensor("output.out", name, [rows, cols], enc(out))]
            st.write(os.path.join(root, f"trial_{t}", f"rank_{r}.safetensors"), tensors,
                     dump_meta("1_allreduce", world, r, t, dtype, M=rows, N=cols, W=world))


class SafetensorsRoundTrip(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="pkb-st-")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_every_dtype_round_trips_bit_for_bit(self):
        nan_payload = struct.pack("<H", 0x7fc1)  # a bf16 NaN with a payload: must survive
        tensors = [
            st.RawTensor("input.a", "BF16", [2, 3], bf16_bytes([1.0, -2.5, 0.0, -0.0, 3.0e38, 1.0e-40])),
            st.RawTensor("input.nan", "BF16", [1], nan_payload),
            st.RawTensor("input.h", "F16", [2], struct.pack("<2e", 1.5, -65504.0)),
            st.RawTensor("input.f", "F32", [3], f32_bytes([1.0, float("inf"), -1e-30])),
            st.RawTensor("input.d", "F64", [1], struct.pack("<d", 0.1)),
            st.RawTensor("input.idx", "I64", [2, 2], struct.pack("<4q", 0, -1, 2 ** 62, 7)),
            st.RawTensor("input.i32", "I32", [1], struct.pack("<i", -5)),
            st.RawTensor("input.i8", "I8", [2], struct.pack("<2b", -128, 127)),
            st.RawTensor("input.u8", "U8", [2], bytes([0, 255])),
            st.RawTensor("input.mask", "BOOL", [3], bytes([1, 0, 1])),
            st.RawTensor("input.empty", "F32", [0, 4], b""),
            st.RawTensor("output.scalar", "F32", [], f32_bytes([2.0])),
        ]
        meta = dump_meta("9_x", 2, 1, 0, M=4, N=8, W=2)
        path = os.path.join(self.dir, "trial_0", "rank_1.safetensors")
        st.write(path, tensors, meta)
        f = st.read(path)
        self.assertEqual(list(f.tensors), [t.name for t in tensors])  # file order kept
        for t in tensors:
            got = f.tensors[t.name]
            self.assertEqual((got.dtype, got.shape, bytes(got.data)), (t.dtype, list(t.shape), t.data), t.name)
        self.assertEqual(f.metadata, meta)
        h = st.read(path, with_data=False)
        self.assertEqual([(t.dtype, t.shape) for t in h.tensors.values()], [(t.dtype, list(t.shape)) for t in tensors])
        self.assertEqual(h.metadata, meta)

    def test_layout_matches_pkb(self):
        path = os.path.join(self.dir, "x.safetensors")
        st.write(path, [st.RawTensor("a", "BF16", [3], bf16_bytes([1, 2, 3])), st.RawTensor("b", "I64", [1], struct.pack("<q", 9))],
                 {"side": "pytorch"})
        data = get(path)
        (n,) = struct.unpack("<Q", data[:8])
        self.assertEqual(n % 8, 0)  # header padded with spaces to 8 bytes, as pkb writes it
        header = json.loads(data[8:8 + n])
        self.assertEqual(header["a"], {"dtype": "BF16", "shape": [3], "data_offsets": [0, 6]})
        self.assertEqual(header["b"]["data_offsets"], [6, 14])
        self.assertEqual(header["__metadata__"], {"side": "pytorch"})
        self.assertEqual(len(data), 8 + n + 14)

    def test_reads_a_file_laid_out_as_pkb_writes_it(self):
        # src/report/safetensors.cpp: nlohmann::json (keys sorted), "__metadata__" among them,
        # the data in the order the tensors were given (here not the key order), header padded
        # with spaces to a multiple of 8.
        header = {"output.out": {"dtype": "BF16", "shape": [2], "data_offsets": [8, 12]},
                  "input.x": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                  "__metadata__": {"problem": "1_allreduce", "param.M": "2"}}
        h = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
        h += b" " * (-len(h) % 8)
        path = os.path.join(self.dir, "pkb.safetensors")
        put(path, struct.pack("<Q", len(h)) + h + f32_bytes([1.0, -3.0]) + bf16_bytes([0.5, 2.0]))
        f = st.read(path)
        self.assertEqual(list(f.tensors), ["input.x", "output.out"])
        self.assertEqual(f.tensors["input.x"].data, f32_bytes([1.0, -3.0]))
        self.assertEqual(f.tensors["output.out"].data, bf16_bytes([0.5, 2.0]))
        self.assertEqual(f.metadata, {"problem": "1_allreduce", "param.M": "2"})

    def test_broken_files_name_the_file_and_the_fault(self):
        good = st.encode([st.RawTensor("a", "F32", [2], f32_bytes([1, 2]))])
        cases = {
            "short": b"\x01\x02",
            "beyond": struct.pack("<Q", 1 << 40) + b"{}",
            "notjson": struct.pack("<Q", 8) + b"{nope   ",
            "offsets": good[:-1],
        }
        for name, blob in cases.items():
            p = os.path.join(self.dir, name + ".safetensors")
            put(p, blob)
            with self.assertRaises(st.SafetensorsError) as cm:
                st.read(p)
            self.assertIn(p, str(cm.exception))
        with self.assertRaises(st.SafetensorsError):
            st.encode([st.RawTensor("a", "F32", [3], f32_bytes([1, 2]))])  # 8 bytes for 12


@unittest.skipUnless(PKB and os.access(PKB, os.X_OK), "PKB_BIN (the pkb binary) not given")
class WithPkb(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="pkb-conf-")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_pkb_reads_what_python_writes(self):
        p = os.path.join(self.dir, "one.safetensors")
        st.write(p, [st.RawTensor("input.x", "BF16", [4], bf16_bytes([1.5, -2.25, 0.0078125, 3.0e38]))], {"side": "pytorch"})
        rc, out = run([PKB, "compare", p, "--inspect"])
        self.assertEqual(rc, 0, out)
        self.assertIn("bf16[4]", out)
        self.assertIn("first: [1.5, -2.25, 0.0078125, 2.99", out)
        self.assertIn("side=pytorch", out)

    def test_compare_and_summary_agree(self):
        a, b = os.path.join(self.dir, "a"), os.path.join(self.dir, "b")
        write_allreduce_dump(a, 2, 2, 4, 8, "bf16")
        write_allreduce_dump(b, 2, 2, 4, 8, "bf16")
        rc, out = run([PKB, "compare", a, b, "--atol", "0.01", "--rtol", "0.01"])
        self.assertEqual(rc, 0, out)
        findings = conformance_summary.parse_compare(out)
        self.assertEqual(len(findings), 8, out)  # 2 trials x 2 ranks x (input, output)
        agree, ins, outs, failures = conformance_summary.judge(findings, rc)
        self.assertEqual((agree, ins, failures), ("yes", "inputs bitwise equal", []))
        self.assertIn("2 rank(s) x 1 output(s) x 2 trial(s), 4/4 bitwise equal", outs)

    def test_compare_and_summary_find_the_difference(self):
        a, b = os.path.join(self.dir, "a"), os.path.join(self.dir, "b")
        write_allreduce_dump(a, 2, 2, 4, 8, "bf16")
        write_allreduce_dump(b, 2, 2, 4, 8, "bf16", perturb=(1, 1))
        os.remove(os.path.join(b, "trial_0", "rank_0.safetensors"))
        rc, out = run([PKB, "compare", a, b, "--atol", "0.01", "--rtol", "0.01"])
        self.assertEqual(rc, 1, out)
        cmp_path = os.path.join(self.dir, "compare.txt")
        put(cmp_path, out)
        agree, _, _, failures = conformance_summary.judge(conformance_summary.parse_compare(out), rc)
        self.assertEqual(agree, "no")
        kinds = {(f["trial"], f["rank"], f["tensor"], f["kind"]) for f in failures}
        self.assertEqual(kinds, {(1, 1, "output.out", "DIFFER"), (0, 0, "", "only in A")}, out)
        rec = os.path.join(self.dir, "run.jsonl")
        with open(rec, "w") as fh:
            fh.write(json.dumps({"status": "ok", "problem": {"stem": "1_allreduce"},
                                 "config": {"world": 2, "size": "tiny", "dtype": "bf16", "atol": 0.01, "rtol": 0.02},
                                 "timing": {"candidate": {"median_us": 30.0}, "baseline": None}}) + "\n")
        timing = os.path.join(self.dir, "timing.json")
        put(timing, json.dumps({"slowest_rank_per_call": {"median_ms": 0.04}}))
        jsonl = os.path.join(self.dir, "summary.jsonl")
        rc, line = run([sys.executable, os.path.join(TOOLS, "conformance_summary.py"), "line", "--problem", "1",
                        "--record", rec, "--compare", cmp_path, "--compare-rc", "1", "--timing", timing, "--jsonl", jsonl])
        self.assertEqual(rc, 0, line)
        self.assertIn("1_allreduce  W=2  size=tiny  bf16  agree=no  pkb baseline 0.0300 ms  PyTorch 0.0400 ms  "
                      "baseline/PyTorch 0.75", line)
        self.assertIn("rank 1 trial 1 output.out DIFFER", line)
        self.assertIn("(r0:out=no r1:out=no;", line)  # rank 0 lacks a file, rank 1 differs
        rc, info = run([sys.executable, os.path.join(TOOLS, "conformance_summary.py"), "info", rec])
        self.assertEqual(info.strip().split("\t"), ["ok", "1_allreduce", "2", "tiny", "bf16", "0.01", "0.02", "30.0"])
        rc, table = run([sys.executable, os.path.join(TOOLS, "conformance_summary.py"), "table", jsonl])
        self.assertIn("| 1_allreduce | 2 | tiny | bf16 | no |", table)
        self.assertIn("0 of 1 problem(s) agree", table)


class Scripts(unittest.TestCase):
    def test_help_and_bad_usage(self):
        for script in ("conformance.sh", "conformance_all.sh"):
            path = os.path.join(TOOLS, script)
            rc, out = run(["bash", path, "--help"])
            self.assertEqual(rc, 0, out)
            self.assertIn("usage: tools/" + script, out)
            rc, out = run(["bash", path, "--no-such-flag"])
            self.assertEqual(rc, 2, out)
            self.assertIn("unknown option --no-such-flag", out)
        rc, out = run(["bash", os.path.join(TOOLS, "conformance.sh"), "1", "--pkb", "/nonexistent-pkb"])
        self.assertEqual(rc, 2, out)
        self.assertIn("not a ParallelKernelBench checkout", out)
        rc, out = run([sys.executable, os.path.join(TOOLS, "conformance.py"), "--help"])
        self.assertEqual(rc, 0, out)
        self.assertIn("--problem-dir", out)

    def test_conformance_py_outside_torchrun_says_how_to_launch(self):
        env = {k: "" for k in ("RANK", "WORLD_SIZE")}
        e = {k: v for k, v in os.environ.items() if k not in env}
        p = subprocess.run([sys.executable, os.path.join(TOOLS, "conformance.py"), "--pkb", "x", "--problem-dir",
                            "problems/1_allreduce", "--dump", "d", "--out", "o"], capture_output=True, text=True, env=e)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("launch with `torchrun", p.stderr)


FAKE_PKB = r"""
import json, os, subprocess, sys
sys.path.insert(0, os.environ["FAKE_TEST_DIR"])
import conformance_tools_test as T
args = sys.argv[1:]
with open(os.environ["FAKE_LOG"], "a") as fh:
    fh.write("pkb " + " ".join(args) + "\n")
if args[0] == "compare":
    os.execv(os.environ["REAL_PKB"], [os.environ["REAL_PKB"]] + args)
opt = {args[i]: args[i + 1] for i in range(2, len(args) - 1) if args[i].startswith("--")}
world = int(opt.get("--gpus", "2"))
stem = {"1": "1_allreduce", "1_allreduce": "1_allreduce"}.get(args[1])
if stem is None:
    print("pkb: unknown problem '" + args[1] + "'", file=sys.stderr)
    sys.exit(2)
T.write_allreduce_dump(opt["--dump"], world, int(opt["--trials"]), 4, 8, "fp32")
rec = {"status": "ok", "problem": {"stem": stem}, "config": {"world": world, "size": "tiny", "dtype": "fp32",
       "atol": 0.01, "rtol": 0.01}, "timing": {"candidate": {"median_us": 25.0} if "--perf" in args else None}}
with open(opt["--json"], "a") as fh:
    fh.write(json.dumps(rec) + "\n")
"""

FAKE_TORCHRUN = r"""
import json, os, shutil, sys
sys.path.insert(0, os.path.join(os.environ["PKB_SOURCE_DIR"], "tools"))
import pkb_safetensors as st
args = sys.argv[1:]
with open(os.environ["FAKE_LOG"], "a") as fh:
    fh.write("torchrun " + " ".join(args) + "\n")
if os.environ.get("FAKE_TORCHRUN_FAIL"):
    print("conformance: error: 1_allreduce rank 1: planted failure", file=sys.stderr)
    sys.exit(1)
opt = {args[i]: args[i + 1] for i in range(len(args) - 1) if args[i].startswith("--")}
for root, _, files in os.walk(opt["--dump"]):
    for f in files:
        src = os.path.join(root, f)
        dst = os.path.join(opt["--out"], os.path.relpath(src, opt["--dump"]))
        x = st.read(src)
        x.metadata["side"] = "pytorch"
        st.write(dst, list(x.tensors.values()), x.metadata)
if "--time" in args:
    with open(os.path.join(opt["--out"], "timing.json"), "w") as fh:
        json.dump({"slowest_rank_per_call": {"median_ms": 0.02}, "median_ms": [0.019, 0.02], "max": 0.02}, fh)
"""


@unittest.skipUnless(PKB and os.access(PKB, os.X_OK), "PKB_BIN (the pkb binary) not given")
class ScriptsWithFakes(unittest.TestCase):
    """conformance.sh and conformance_all.sh end to end, with a stand-in `pkb run` (writes a dump
    and a record) and a stand-in torchrun (copies the dump as PyTorch's answer); `pkb compare` is
    the real one."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="pkb-conf-sh-")
        self.log = os.path.join(self.dir, "argv.log")
        put(os.path.join(self.dir, "fake_pkb.py"), FAKE_PKB)
        put(os.path.join(self.dir, "fake_torchrun.py"), FAKE_TORCHRUN)
        self.pkb_bin = os.path.join(self.dir, "pkb")
        put(self.pkb_bin, f'#!/bin/sh\nexec "{sys.executable}" "{self.dir}/fake_pkb.py" "$@"\n')
        os.chmod(self.pkb_bin, 0o755)
        self.checkout = os.path.join(self.dir, "pkb-checkout")
        os.makedirs(os.path.join(self.checkout, "reference"))
        self.env = {"PKB_BIN": self.pkb_bin, "REAL_PKB": PKB, "FAKE_LOG": self.log,
                    "FAKE_TEST_DIR": os.path.dirname(os.path.abspath(__file__)), "PKB_SOURCE_DIR": SRC,
                    "PYTHON": sys.executable, "TORCHRUN": f"{sys.executable} {self.dir}/fake_torchrun.py"}

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_one_problem_agrees_and_reports_both_times(self):
        work, summary = os.path.join(self.dir, "work"), os.path.join(self.dir, "s.jsonl")
        rc, out = run(["bash", os.path.join(TOOLS, "conformance.sh"), "1", "--pkb", self.checkout, "--gpus", "2",
                       "--trials", "2", "--time", "--iters", "7", "--work", work, "--summary", summary],
                      env=dict(self.env, CONFORMANCE_ARGS="--io builtin  --predelay-us 50"))
        self.assertEqual(rc, 0, out)
        last = out.strip().splitlines()[-1]
        self.assertIn("1_allreduce  W=2  size=tiny  fp32  agree=yes  pkb baseline 0.0250 ms  PyTorch 0.0200 ms  "
                      "baseline/PyTorch 1.25  (r0:out=yes r1:out=yes; inputs bitwise equal; 2 rank(s) x 1 output(s) x 2 trial(s), 4/4 "
                      "bitwise equal)", last)
        argv = get(self.log).decode()
        self.assertIn(f"pkb run 1 --dump {work}/pkb --trials 2 --json {work}/run.jsonl --iters 7 --gpus 2 --perf", argv)
        self.assertIn(f"torchrun --standalone --nproc_per_node 2 {TOOLS}/conformance.py --pkb {self.checkout} "
                      f"--problem-dir {SRC}/problems/1_allreduce --dump {work}/pkb --out {work}/pytorch --iters 7 --time "
                      "--io builtin --predelay-us 50", argv)
        self.assertIn(f"pkb compare {work}/pkb {work}/pytorch\n", argv)  # each output's rule, from pkb's dump
        self.assertEqual(json.loads(get(summary))["agree"], "yes")

    def test_failures_give_a_summary_line_and_exit_1(self):
        env = dict(self.env, FAKE_TORCHRUN_FAIL="1")
        rc, out = run(["bash", os.path.join(TOOLS, "conformance.sh"), "1", "--pkb", self.checkout, "--gpus", "2",
                       "--work", os.path.join(self.dir, "w1")], env=env)
        self.assertEqual(rc, 1, out)
        self.assertIn("planted failure", out)
        self.assertIn("agree=error", out.strip().splitlines()[-1])
        self.assertIn("conformance.py failed (exit 1;", out.strip().splitlines()[-1])
        rc, out = run(["bash", os.path.join(TOOLS, "conformance.sh"), "99", "--pkb", self.checkout,
                       "--work", os.path.join(self.dir, "w2")], env=self.env)
        self.assertEqual(rc, 1, out)
        self.assertIn("99  W=?  size=?  ?  agree=error", out)
        self.assertIn("pkb run failed (exit 2;", out)

    def test_all_prints_a_table(self):
        logs = os.path.join(self.dir, "logs")
        rc, out = run(["bash", os.path.join(TOOLS, "conformance_all.sh"), "--pkb", self.checkout, "--gpus", "2",
                       "--trials", "1", "--logs", logs, "1_allreduce", "99"], env=self.env)
        self.assertEqual(rc, 1, out)  # 99 does not exist
        self.assertIn(f"logs in {logs}", out)
        self.assertIn("| 1_allreduce | 2 | tiny | fp32 | yes | inputs bitwise equal |", out)
        self.assertIn("| 99 | ? | ? | ? | error |", out)
        self.assertIn("1 of 2 problem(s) agree", out)
        self.assertTrue(os.path.isfile(os.path.join(logs, "table.md")))
        self.assertTrue(os.path.isfile(os.path.join(logs, "1_allreduce.log")))


def have_torch():
    try:
        import torch.distributed as d  # noqa: F401
        return d.is_available() and d.is_gloo_available()
    except ImportError:
        return False


@unittest.skipUnless(have_torch() and PKB and os.access(PKB, os.X_OK), "needs PyTorch with gloo and PKB_BIN")
class EndToEndOnCpu(unittest.TestCase):
    """conformance.py through torch.distributed.run on gloo, against a stand-in PKB checkout whose
    reference imports from utils/ (as PKB's do)."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="pkb-conf-e2e-")
        self.pkb = os.path.join(self.dir, "pkb")
        os.makedirs(os.path.join(self.pkb, "reference"))
        os.makedirs(os.path.join(self.pkb, "utils"))
        put(os.path.join(self.pkb, "utils", "__init__.py"), "")
        put(os.path.join(self.pkb, "utils", "sums.py"), 
            "import torch.distributed as dist\n\ndef summed(t):\n    out = t.clone()\n    dist.all_reduce(out)\n    return out\n")
        put(os.path.join(self.pkb, "reference", "1_allreduce.py"), 
            "from utils.sums import summed\n\ndef solution(tensor):\n    return summed(tensor)\n")
        self.dump = os.path.join(self.dir, "dump")
        write_allreduce_dump(self.dump, 2, 2, 4, 8, "fp32")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def launch(self, problem_dir, out, io="auto", world=2):
        """What torchrun does, minus its agent (Debian's torch 1.13 cannot run its agent on Python
        3.11): one process per rank with RANK/WORLD_SIZE/MASTER_*; when one fails, the others get
        a few seconds and are then killed. Returns (worst exit code, all output)."""
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        cmd = [sys.executable, os.path.join(TOOLS, "conformance.py"), "--device", "cpu", "--io", io, "--timeout", "60",
               "--pkb", self.pkb, "--problem-dir", problem_dir, "--dump", self.dump, "--out", out]
        procs = []
        for r in range(world):
            env = dict(os.environ, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1",
                       MASTER_PORT=str(port), OMP_NUM_THREADS="1")
            procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
        deadline = time.time() + 240
        while any(p.poll() is None for p in procs) and time.time() < deadline:
            if any(p.poll() not in (None, 0) for p in procs):
                deadline = min(deadline, time.time() + 5)
            time.sleep(0.1)
        for p in procs:
            if p.poll() is None:
                p.kill()
        outs = [p.communicate()[0] for p in procs]
        codes = [p.returncode for p in procs]
        return max(codes, key=abs), "".join(f"--- rank {r} (exit {c})\n{o}" for r, (c, o) in enumerate(zip(codes, outs)))

    def test_outputs_agree_and_inputs_are_fed_unchanged(self):
        out = os.path.join(self.dir, "out")
        rc, log = self.launch(os.path.join(SRC, "problems", "1_allreduce"), out, io="builtin")
        self.assertEqual(rc, 0, log)
        f = st.read(os.path.join(out, "trial_1", "rank_1.safetensors"))
        self.assertEqual(f.metadata["side"], "pytorch")
        self.assertEqual(f.metadata["param.M"], "4")
        rc, cmp = run([PKB, "compare", self.dump, out, "--atol", "0", "--rtol", "0"])
        self.assertEqual(rc, 0, cmp)
        self.assertEqual(cmp.count("bitwise equal"), 8, cmp)

    def test_a_wrong_shape_names_problem_rank_and_tensor(self):
        pdir = os.path.join(self.dir, "problems", "1_allreduce")
        os.makedirs(pdir)
        put(os.path.join(pdir, "torch_adapter.py"), 
            'UPSTREAM = "reference/1_allreduce.py"\n\ndef make_args(inputs, ctx):\n    return (inputs["tensor"],)\n\n'
            'def to_outputs(result, inputs, ctx):\n    return {"out": result.flatten()}\n')
        rc, log = self.launch(pdir, os.path.join(self.dir, "bad"))
        self.assertNotEqual(rc, 0, log)
        self.assertRegex(log, r"1_allreduce rank [01]: trial 0: output 'out': shape \[32\] from to_outputs, but "
                              r"pkb's is \[4, 8\] \(F32\)")

    def test_a_missing_upstream_file_is_named(self):
        os.remove(os.path.join(self.pkb, "reference", "1_allreduce.py"))
        rc, log = self.launch(os.path.join(SRC, "problems", "1_allreduce"), os.path.join(self.dir, "bad"))
        self.assertNotEqual(rc, 0, log)
        self.assertIn("1_allreduce: the upstream reference", log)
        self.assertIn("reference/1_allreduce.py (UPSTREAM in", log)


if __name__ == "__main__":
    unittest.main(verbosity=2)
