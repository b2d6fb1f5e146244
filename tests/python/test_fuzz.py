"""Property-based fuzz of the one-sided API (Hypothesis), in real multi-rank jobs.

Every rank draws its own random sequences of put / get / put_with_signal / signal_op /
wait_for_signal calls with random, often invalid, arguments (negative or huge offsets and
sizes, wrong types, bools, floats, strings, tensors as scalars, wrong dtypes,
non-contiguous or non-symmetric tensors, ranks out of range, bad ops, values that do not
fit the signal). An oracle written independently of the library says whether each call
is valid: a valid call must succeed and is applied to a model of the memory it reaches; an
invalid one must raise a ShmemError and change nothing.

Rank r only ever writes its own window (and signal words) on each rank, so the model of
rank r is exact while all ranks run at once. Every window sits between guard elements
filled with poison. At the end every rank reads its windows back from every rank and
compares them with its model, and checks the guards of its own memory; get targets are
checked in full after each get.

CI runs a bounded, seeded number of examples; ``make fuzz`` runs many more
(HP_FUZZ_EXAMPLES, HP_FUZZ_SEED).
"""

import os

import numpy as np
import pytest
from frameworks import current, poison
from launcher import assert_job_ok

HERE = os.path.abspath(__file__)

DTYPES = ["int8", "int32", "float64", "bfloat16"]
S, G, K = 37, 11, 5  # window elements, guard elements either side, signal words per rank
HUGE = [2**31, 2**40, 2**63 - 1, 2**64]


class Bad:
    """An argument the oracle knows to be invalid, whatever its value."""

    def __init__(self, obj):
        self.obj = obj

    def __repr__(self):
        return f"Bad({self.obj!r})"


def _strategies(world):
    from hypothesis import strategies as st

    def integer(valid_hi):
        # Mostly in range; sometimes just past it, negative, huge; sometimes not an int at all.
        return st.one_of(
            st.integers(0, valid_hi),
            st.integers(0, valid_hi),
            st.integers(0, valid_hi),
            st.integers(valid_hi + 1, valid_hi + 3),
            st.integers(-3, -1),
            st.sampled_from(HUGE),
            st.tuples(st.just("tensor"), st.integers(0, valid_hi)),
            st.sampled_from([Bad(True), Bad(1.0), Bad("2"), Bad(None), Bad("tensor2"), Bad("ftensor")]),
        )

    rank = st.one_of(
        st.integers(0, world - 1),
        st.integers(0, world - 1),
        st.sampled_from([-1, world]),
        st.tuples(st.just("tensor"), st.integers(0, world - 1)),
        st.sampled_from([Bad(False), Bad(0.0), Bad("0")]),
    )
    value = st.one_of(
        st.integers(-(2**31), 2**31 - 1),
        st.integers(-5, 5),
        st.integers(-(2**64), 2**64),
        st.sampled_from([Bad(1.5), Bad(True)]),
    )
    sig_op = st.sampled_from([0, 1, "set", "add", "SET", "Add", 2, -1, "mul", Bad(True), Bad(0.0)])
    cmp_op = st.sampled_from([0, 1, 2, 3, 4, 5, "eq", "ne", "ge", "le", "gt", "lt", "GE", 6, -1, "approx", Bad(True)])
    wild = {
        "kind": st.sampled_from(["put", "put", "get", "get", "put_signal", "signal", "wait"]),
        "dtype": st.sampled_from(DTYPES),
        "m": st.integers(0, S + 4),  # elements of the local tensor
        "local": st.sampled_from(["ok", "ok", "ok", "ok", "wrong_dtype", "noncontig", "list", "symmetric"]),
        "window": st.sampled_from(["ok", "ok", "ok", "ok", "ok", "local"]),
        "toff": integer(S),
        "soff": integer(S),
        "size": integer(S),
        "rank": rank,
        "width": st.sampled_from([4, 8]),
        "signal": st.sampled_from(["ok", "ok", "ok", "float", "local"]),
        "sig_off": integer(K - 1),
        "value": value,
        "op": sig_op,
        "cmp": cmp_op,
        "cmp_value": st.one_of(st.just("current"), st.just("current"), value),
        "seed": st.integers(0, 2**31),
    }

    @st.composite
    def call(draw):
        # Most calls are valid (drawn inside the ranges), many have exactly one bad argument,
        # a few are wild in every argument.
        mode = draw(st.sampled_from(["valid"] * 5 + ["one"] * 3 + ["edge"] * 2 + ["wild"]))
        if mode == "wild":
            return {k: draw(v) for k, v in wild.items()}
        kind = draw(wild["kind"])
        m = draw(st.integers(0, S + 4))
        n = draw(st.integers(0, min(S, m)))
        local_len, remote_len = (m, S) if kind == "get" else (S, m)  # (target, source) lengths
        width = draw(st.sampled_from([4, 8]))
        edge = st.sampled_from(["low", "high", "any", "any"])  # flush against either end, or anywhere

        def offset(hi):
            where = draw(edge)
            return 0 if where == "low" else hi if where == "high" else draw(st.integers(0, hi))

        op = {
            "kind": kind,
            "dtype": draw(wild["dtype"]),
            "m": m,
            "local": draw(st.sampled_from(["ok", "symmetric"])),
            "window": "ok",
            "size": n,
            "toff": offset(local_len - n),
            "soff": offset(remote_len - n),
            "rank": draw(st.integers(0, world - 1)),
            "width": width,
            "signal": "ok",
            "sig_off": draw(st.integers(0, K - 1)),
            "value": draw(st.integers(-(1 << (8 * width - 1)), (1 << (8 * width - 1)) - 1)),
            "op": draw(st.sampled_from([0, 1, "set", "add"])),
            "cmp": draw(st.sampled_from([0, 4, 5, "eq", "ge", "le"])),
            "cmp_value": "current",
            "seed": draw(wild["seed"]),
        }
        if mode == "one":
            field = draw(st.sampled_from(sorted(set(wild) - {"kind", "dtype", "seed"})))
            op[field] = draw(wild[field])
        elif mode == "edge":  # one element past the end of the target or the source
            field = draw(st.sampled_from(["toff", "soff", "size", "sig_off"]))
            if field == "size":
                op["size"] = min(local_len - op["toff"], remote_len - op["soff"]) + 1
            elif field == "sig_off":
                op["sig_off"] = K
            else:
                op[field] = (local_len if field == "toff" else remote_len) - n + 1
        return op

    return call()


class Fuzzer:
    def __init__(self, rank, world):
        import hyper_parallel.core.symmetric_memory as symm

        self.symm, self.F, self.rank, self.world = symm, current(), rank, world
        F = self.F
        span = S + 2 * G
        self.bufs, self.windows, self.model = {}, {}, {}
        for name in DTYPES:
            buf = symm.empty(world * span, dtype=F.dtype(name))
            F.fill(buf, poison(name))
            self.bufs[name] = buf
            self.windows[name] = buf[rank * span + G : rank * span + G + S]
            pbits = F.bits(F.full(S, poison(name), name))
            self.model[name] = [pbits.copy() for _ in range(world)]
        self.scratch = {name: symm.empty(S + 4, dtype=F.dtype(name)) for name in DTYPES}
        self.sigbufs, self.sigs, self.sig_model = {}, {}, {}
        for width, name in ((4, "int32"), (8, "int64")):
            sb = symm.empty(world * K, dtype=F.dtype(name))
            F.fill(sb, 0)
            self.sigbufs[width] = sb
            self.sigs[width] = sb[rank * K : (rank + 1) * K]
            self.sig_model[width] = [np.zeros(K, dtype=np.int64) for _ in range(world)]
        symm.barrier()
        self.calls = {"valid": 0, "invalid": 0}

    # -------------------------------------------------------------- arguments
    def arg(self, x):
        """(python object to pass, the int it means or None when invalid)."""
        F = self.F
        if isinstance(x, Bad):
            if x.obj == "tensor2":
                return F.tensor([1, 2], "int64"), None
            if x.obj == "ftensor":
                return F.tensor([1.0], "float32"), None
            return x.obj, None
        if isinstance(x, tuple):
            return F.tensor([x[1]], "int64"), x[1]
        return x, x

    @staticmethod
    def fits(v, width):
        return v is not None and -(1 << (8 * width - 1)) <= v < (1 << (8 * width - 1))

    def local_tensor(self, how, name, m, seed):
        F = self.F
        if how == "wrong_dtype":
            return F.random("int16" if name != "int16" else "int32", m, seed), False
        if how == "noncontig":
            return F.non_contiguous(m), False
        if how == "list":
            return [0] * m, False
        if how == "symmetric":  # a symmetric tensor is a legal local one too (its own, untouched by peers)
            t = self.scratch[name][:m]
            F.assign(t, F.random(name, m, seed))
            return t, True
        return F.random(name, m, seed), True

    def signal_args(self, op):
        F = self.F
        width = op["width"]
        if op["signal"] == "float":
            sig, ok = self.windows["float64"][:K], False
        elif op["signal"] == "local":
            sig, ok = F.full(K, 0, "int64"), False
        else:
            sig, ok = self.sigs[width], True
        off_obj, off = self.arg(op["sig_off"])
        ok = ok and off is not None and 0 <= off < K
        return sig, off_obj, off, width, ok

    def sig_op(self, x):
        if isinstance(x, Bad):
            return x.obj, None
        if isinstance(x, str):
            return x, {"set": 0, "add": 1}.get(x.lower())
        return x, x if x in (0, 1) else None

    def cmp_op(self, x):
        names = {"eq": 0, "gt": 1, "lt": 2, "ne": 3, "ge": 4, "le": 5}
        if isinstance(x, Bad):
            return x.obj, None
        if isinstance(x, str):
            return x, names.get(x.lower())
        return x, x if 0 <= x <= 5 else None

    # -------------------------------------------------------------- one call
    def run(self, op):
        kind = op["kind"]
        if kind in ("put", "put_signal"):
            self.put(op, with_signal=kind == "put_signal")
        elif kind == "get":
            self.get(op)
        elif kind == "signal":
            self.signal(op)
        else:
            self.wait(op)

    def expect(self, valid, fn, *args):
        symm = self.symm
        if valid:
            self.calls["valid"] += 1
            return fn(*args)
        self.calls["invalid"] += 1
        try:
            fn(*args)
        except symm.ShmemError:
            return None
        raise AssertionError(f"{fn.__name__} accepted invalid arguments")

    def put(self, op, with_signal):
        F, name = self.F, op["dtype"]
        m = op["m"]
        src, src_ok = self.local_tensor(op["local"], name, m, op["seed"])
        target = self.windows[name] if op["window"] == "ok" else F.full(S, poison(name), name)
        (toff_o, toff), (soff_o, soff), (n_o, n), (r_o, r) = (self.arg(op[k]) for k in ("toff", "soff", "size", "rank"))
        ok = (
            src_ok
            and op["window"] == "ok"
            and None not in (toff, soff, n, r)
            and min(toff, soff, n) >= 0
            and toff + n <= S
            and soff + n <= m
            and 0 <= r < self.world
        )
        if not with_signal:
            self.expect(ok, self.symm.shmem_put, target, toff_o, src, soff_o, n_o, r_o)
        else:
            sig, off_o, off, width, sig_ok = self.signal_args(op)
            (val_o, val), (sop_o, sop) = self.arg(op["value"]), self.sig_op(op["op"])
            ok = ok and sig_ok and self.fits(val, width) and sop is not None
            self.expect(
                ok, self.symm.shmem_put_with_signal, target, toff_o, src, soff_o, n_o, sig, off_o, val_o, sop_o, r_o
            )
            if ok:
                self.apply_signal(width, r, off, val, sop)
        if ok:
            self.model[name][r][toff : toff + n] = F.bits(src)[soff : soff + n]

    def get(self, op):
        F, name = self.F, op["dtype"]
        m = op["m"]
        dst, dst_ok = self.local_tensor(op["local"], name, m, op["seed"])
        if dst_ok:
            F.fill(dst, poison(name))
        before = F.bits(dst) if dst_ok or op["local"] != "list" else None
        src = self.windows[name] if op["window"] == "ok" else F.full(S, poison(name), name)
        (toff_o, toff), (soff_o, soff), (n_o, n), (r_o, r) = (self.arg(op[k]) for k in ("toff", "soff", "size", "rank"))
        ok = (
            dst_ok
            and op["window"] == "ok"
            and None not in (toff, soff, n, r)
            and min(toff, soff, n) >= 0
            and toff + n <= m
            and soff + n <= S
            and 0 <= r < self.world
        )
        self.expect(ok, self.symm.shmem_get, dst, toff_o, src, soff_o, n_o, r_o)
        if before is None:
            return
        want = before.copy()
        if ok:
            want[toff : toff + n] = self.model[name][r][soff : soff + n]
        got = F.bits(dst)
        assert np.array_equal(got, want), (
            f"get {name} toff={toff} soff={soff} n={n} rank={r} ok={ok}: got {got}, want {want}"
        )

    def apply_signal(self, width, r, off, val, sop):
        cur = int(self.sig_model[width][r][off])
        new = val if sop == 0 else cur + val
        bits = 8 * width
        new = (new + (1 << (bits - 1))) % (1 << bits) - (1 << (bits - 1))  # two's complement wrap
        self.sig_model[width][r][off] = new

    def signal(self, op):
        sig, off_o, off, width, ok = self.signal_args(op)
        (val_o, val), (sop_o, sop), (r_o, r) = self.arg(op["value"]), self.sig_op(op["op"]), self.arg(op["rank"])
        ok = ok and self.fits(val, width) and sop is not None and r is not None and 0 <= r < self.world
        self.expect(ok, self.symm.shmem_signal_op, sig, off_o, val_o, sop_o, r_o)
        if ok:
            self.apply_signal(width, r, off, val, sop)

    def wait(self, op):
        sig, off_o, off, width, ok = self.signal_args(op)
        cop_o, cop = self.cmp_op(op["cmp"])
        cur = int(self.sig_model[width][self.rank][off]) if ok else 0
        if op["cmp_value"] == "current":
            cv_o, cv = cur, cur
        else:
            cv_o, cv = self.arg(op["cmp_value"])
        ok = ok and cop is not None and self.fits(cv, width)
        if ok:
            holds = [cur == cv, cur > cv, cur < cv, cur != cv, cur >= cv, cur <= cv][cop]
            if not holds:
                return  # would wait for a signal nobody sends
        got = self.expect(ok, self.symm.shmem_wait_for_signal, None, sig, off_o, cv_o, cop_o)
        if ok:
            assert got == cur, f"wait returned {got}, the signal holds {cur}"

    # -------------------------------------------------------------- the end
    def verify(self):
        symm, F = self.symm, self.F
        symm.barrier()
        span = S + 2 * G
        for name in DTYPES:
            for p in range(self.world):
                back = F.full(S, poison(name), name)
                symm.shmem_get(back, 0, self.windows[name], 0, S, p)
                assert np.array_equal(F.bits(back), self.model[name][p]), f"{name} window on rank {p} differs"
            mine = F.bits(self.bufs[name])
            guard = F.bits(F.full(G, poison(name), name))
            for q in range(self.world):
                lo, hi = mine[q * span : q * span + G], mine[q * span + G + S : (q + 1) * span]
                assert np.array_equal(lo, guard) and np.array_equal(hi, guard), f"{name}: guard of window {q} hit"
        for width in (4, 8):
            for p in range(self.world):
                back = F.full(K, 0, "int32" if width == 4 else "int64")
                symm.shmem_get(back, 0, self.sigs[width], 0, K, p)
                assert np.array_equal(F.values(back), self.sig_model[width][p]), f"int{8 * width} signals on {p}"
        symm.barrier()


def scenario_fuzz(rank, world, examples=60, seed=0):
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hseed
    from hypothesis import strategies as st

    fz = Fuzzer(rank, world)

    @hseed(seed * 1000 + rank)
    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        phases=(Phase.generate,),
        suppress_health_check=list(HealthCheck),
    )
    @given(st.lists(_strategies(world), min_size=1, max_size=6))
    def calls(ops):
        for i, op in enumerate(ops):
            try:
                fz.run(op)
            except Exception:
                print(f"rank {rank}: call {i} of {ops}", flush=True)
                raise

    calls()
    fz.verify()
    print(f"rank {rank}: {fz.calls['valid']} valid and {fz.calls['invalid']} invalid calls checked", flush=True)
    fz.symm.finalize()


@pytest.mark.parametrize("world,layout", [(2, "shm"), (3, "hosts")])
def test_fuzzed_calls_match_the_model_and_bad_ones_write_nothing(world, layout, fw):
    examples = int(os.environ.get("HP_FUZZ_EXAMPLES", "150"))
    seed = int(os.environ.get("HP_FUZZ_SEED", "1"))
    res = assert_job_ok(
        HERE,
        "scenario_fuzz",
        world,
        framework=fw,
        layout=layout,
        timeout=120 + examples,
        kwargs={"examples": examples, "seed": seed},
        env={"HYPER_PARALLEL_SHMEM_TIMEOUT_SEC": str(60 + examples)},
    )
    assert "invalid calls checked" in res.describe()
