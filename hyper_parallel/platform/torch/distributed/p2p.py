"""Point-to-point messages of the ``hpshmem`` process group (send, recv, recv_anysource, batches).

Every ordered pair of group members has a one-chunk inbox in the receiver's part of the group's
symmetric slot. A sender puts a chunk (its 32-byte header, then the data with a put-with-signal
that SETs the inbox's sequence word, so the header and data are visible before the sequence) and
then rings the receiver's doorbell (an ADD). The receiver copies the chunk out — into the posted
receive it matches by source and tag, or into a buffer of its own when none is posted yet — and
returns the inbox by SETting a credit word in the sender, ringing the sender's doorbell. Each rank
waits on its doorbell alone, which any arrival or credit bumps.

Progress happens whenever a rank is inside a point-to-point call or a ``wait()``, and on a thread
of the group's own while any operation is pending, so a send completes even while its rank blocks
in a collective. Messages of one source and tag are received in the order sent.

Area layout (int64 words, per group slot; W = the job's ranks, an upper bound on group sizes):
    [0] doorbell | credit[W] (from each receiver) | seq[W] (of each sender's inbox) | inbox[W]
with each inbox 64 bytes of header (tag, total bytes, offset, chunk bytes) + `chunk` data bytes.
"""

from __future__ import annotations

import collections
import threading
import time

import torch
import torch.distributed as dist
from torch.futures import Future

from hyper_parallel import _hpshmem as _C

_SET, _ADD, _GT = 0, 1, 1
_HEADER = 64


def _align(n: int) -> int:
    return (n + 63) // 64 * 64


def _layout(world: int, chunk: int):
    credit = 64
    seq = _align(credit + 8 * world)
    inbox = _align(seq + 8 * world)
    return credit, seq, inbox, _HEADER + chunk


def area_bytes(world: int, chunk: int) -> int:
    """Bytes of one group's point-to-point area for a job of `world` ranks."""
    _, _, inbox, stride = _layout(world, chunk)
    return _align(inbox + world * stride)


class P2PWork(dist.Work):
    """One send or receive; complete once its bytes have left (send) or arrived (recv)."""

    def __init__(self, engine, tensor):
        super().__init__()
        self._engine = engine
        self._tensor = tensor
        self.done = False
        self.error = None
        self.source = -1

    def _finish(self, error=None):
        self.error = error
        self.done = True

    def wait(self, timeout=None) -> bool:
        if not self.done:
            self._engine.wait_for(self, timeout.total_seconds() if timeout else None)
        if self.error is not None:
            raise self.error
        return True

    def is_completed(self) -> bool:
        if not self.done:
            self._engine.poll_once()
        return self.done

    def is_success(self) -> bool:
        return self.done and self.error is None

    def exception(self):
        return self.error

    def source_rank(self) -> int:
        if not self.done:
            self.wait()
        return self.source

    _source_rank = source_rank  # the name dist.recv calls

    def result(self):
        return [self._tensor]

    def get_future(self) -> Future:
        f = Future()
        try:
            self.wait()
            f.set_result([self._tensor])
        except Exception as e:  # noqa: BLE001 (the future carries whatever the wait raised)
            f.set_exception(e)
        return f


class BatchWork(dist.Work):
    """The works of one ``_coalescing_manager`` block (``batch_isend_irecv``), waited together."""

    def __init__(self, works):
        super().__init__()
        self._works = list(works)

    def wait(self, timeout=None) -> bool:
        for w in self._works:
            w.wait()
        return True

    def is_completed(self) -> bool:
        return all(w.is_completed() for w in self._works)

    def get_future(self) -> Future:
        f = Future()
        self.wait()
        f.set_result([])
        return f


class _Send:
    __slots__ = ("work", "data", "dst", "tag", "off")

    def __init__(self, work, data, dst, tag):
        self.work, self.data, self.dst, self.tag, self.off = work, data, dst, tag, 0


class _Incoming:
    """A message being received from one source: where its bytes go and how many have come."""

    __slots__ = ("src", "tag", "total", "got", "buffer", "recv")

    def __init__(self, src, tag, total, buffer, recv):
        self.src, self.tag, self.total, self.got, self.buffer, self.recv = src, tag, total, 0, buffer, recv


class _Recv:
    __slots__ = ("work", "src", "tag", "flat", "tensor")

    def __init__(self, work, src, tag, flat, tensor):
        self.work, self.src, self.tag, self.flat, self.tensor = work, src, tag, flat, tensor


class P2P:
    """The point-to-point engine of one process group (see the module's description)."""

    def __init__(self, area: int, me: int, ranks, team: int, chunk: int):
        self._me = me
        self._pes = tuple(ranks)  # global rank of each group rank
        self._w = len(self._pes)
        self._team = team
        self._chunk = chunk
        credit, seq, inbox, stride = _layout(_C.n_pes(), chunk)
        self._doorbell = area
        self._credit = [area + credit + 8 * p for p in range(self._w)]
        self._seq = [area + seq + 8 * p for p in range(self._w)]
        self._inbox = [area + inbox + stride * p for p in range(self._w)]
        self._lock = threading.RLock()
        self._sent = [0] * self._w  # chunks put into each peer's inbox
        self._taken = [0] * self._w  # chunks taken out of each sender's inbox
        self._queues = [collections.deque() for _ in range(self._w)]
        self._posted = []  # receives waiting for a message, in the order posted
        self._unexpected = []  # _Incoming messages (complete or arriving) that no receive has claimed
        self._current = [None] * self._w  # _Incoming from each source whose chunks are arriving
        self._header = torch.zeros(4, dtype=torch.int64)
        self._thread = None
        self._closed = False
        self._failure = None

    # ------------------------------------------------------------------ posting
    def send(self, t: torch.Tensor, dst: int, tag: int, batch):
        self._check_peer(dst, "send")
        flat = t.reshape(-1).contiguous().view(torch.uint8) if t.numel() else torch.empty(0, dtype=torch.uint8)
        work = P2PWork(self, t)
        with self._lock:
            self._raise_failure()
            self._queues[dst].append(_Send(work, flat, dst, tag))
            self._progress()
        self._after_post(work, batch)
        return work

    def recv(self, t: torch.Tensor, src: int, tag: int, batch):
        if src != -1:
            self._check_peer(src, "recv")
        contiguous = t.is_contiguous()
        flat = (
            t.view(-1).view(torch.uint8)
            if contiguous and t.numel()
            else torch.empty(t.numel() * t.element_size(), dtype=torch.uint8)
        )
        work = P2PWork(self, t)
        r = _Recv(work, src, tag, flat, None if contiguous else t)
        with self._lock:
            self._raise_failure()
            if not self._claim_unexpected(r):
                self._posted.append(r)
            self._progress()
        self._after_post(work, batch)
        return work

    def _check_peer(self, p: int, what: str):
        if not 0 <= p < self._w:
            raise ValueError(f"hpshmem {what}: rank {p} is not a rank of this group of {self._w}")

    def _after_post(self, work, batch):
        if batch is not None:
            batch.append(work)
        if not work.done:
            self._ensure_thread()

    # ------------------------------------------------------------------ matching
    def _claim_unexpected(self, r: _Recv) -> bool:
        for i, m in enumerate(self._unexpected):
            if (r.src == -1 or r.src == m.src) and r.tag == m.tag:
                del self._unexpected[i]
                if m.total != r.flat.numel():
                    r.work._finish(self._size_error(m, r))
                    if m.got < m.total:
                        m.recv = None  # keep draining into its own buffer
                    return True
                if m.got:
                    r.flat[: m.got].copy_(m.buffer[: m.got])
                r.work.source = m.src
                if m.got == m.total:
                    self._complete_recv(r)
                else:
                    m.buffer, m.recv = r.flat, r  # the rest lands straight in the receive
                return True
        return False

    def _size_error(self, m, r):
        return ValueError(
            f"hpshmem recv: the message from rank {m.src} with tag {m.tag} has {m.total} bytes; "
            f"the receive tensor has {r.flat.numel()}"
        )

    def _complete_recv(self, r: _Recv):
        if r.tensor is not None:
            r.tensor.copy_(r.flat.view(r.tensor.dtype).view(r.tensor.shape))
        r.work._finish()

    def _match_posted(self, src: int, tag: int, total: int):
        for i, r in enumerate(self._posted):
            if (r.src == -1 or r.src == src) and r.tag == tag:
                del self._posted[i]
                if r.flat.numel() != total:
                    m = _Incoming(src, tag, total, torch.empty(total, dtype=torch.uint8), None)
                    r.work._finish(self._size_error(m, r))
                    return m
                r.work.source = src
                return _Incoming(src, tag, total, r.flat, r)
        m = _Incoming(src, tag, total, torch.empty(total, dtype=torch.uint8), None)
        self._unexpected.append(m)
        return m

    # ------------------------------------------------------------------ progress
    def _progress(self) -> bool:
        """One pass over every inbox and every send queue (lock held); True if anything moved."""
        moved = False
        for s in range(self._w):
            while _C.signal_fetch(self._seq[s], 8) > self._taken[s]:
                self._take(s)
                moved = True
        for p in range(self._w):
            q = self._queues[p]
            while q and self._sent[p] == _C.signal_fetch(self._credit[p], 8):
                self._push(q[0])
                moved = True
                if q[0].off >= q[0].data.numel():
                    q.popleft().work._finish()
        return moved

    def _push(self, s: _Send):
        n = s.data.numel()
        k = min(self._chunk, n - s.off)
        h = self._header
        h[0], h[1], h[2], h[3] = s.tag, n, s.off, k
        pe = self._pes[s.dst]
        box = self._inbox[self._me]  # our inbox in the receiver: same offset there
        _C.put(box, h.data_ptr(), 32, pe)
        self._sent[s.dst] += 1
        src = s.data.data_ptr() + s.off if k else h.data_ptr()
        _C.put_signal(box + _HEADER, src, k, self._seq[self._me], 8, self._sent[s.dst], _SET, pe)
        _C.signal(self._doorbell, 8, 1, _ADD, pe)
        s.off += k if n else 1  # an empty message is one empty chunk

    def _take(self, s: int):
        box = self._inbox[s]
        h = torch.frombuffer((ctypes_array(box, 32)), dtype=torch.int64)
        tag, total, off, k = (int(v) for v in h.tolist())
        m = self._current[s]
        if m is None:
            m = self._current[s] = self._match_posted(s, tag, total)
        if k:
            src = torch.frombuffer(ctypes_array(box + _HEADER, k), dtype=torch.uint8)
            m.buffer[off : off + k].copy_(src)
        m.got = off + k
        self._taken[s] += 1
        # The inbox is free again: tell the sender (credit, then its doorbell).
        pe = self._pes[s]
        _C.signal(self._credit[self._me], 8, self._taken[s], _SET, pe)
        _C.signal(self._doorbell, 8, 1, _ADD, pe)
        if m.got >= m.total:
            self._current[s] = None
            if m.recv is not None:
                self._complete_recv(m.recv)

    def cancel(self, work: P2PWork) -> bool:
        """Withdraws a receive no message has started to fill (a monitored barrier's, after its
        deadline), so that a later message goes to a later receive. False if it had started."""
        with self._lock:
            for i, r in enumerate(self._posted):
                if r.work is work:
                    del self._posted[i]
                    return True
        return False

    def _pending(self) -> bool:
        return (
            any(self._queues) or bool(self._posted) or any(m is not None and m.recv is not None for m in self._current)
        )

    def poll_once(self):
        with self._lock:
            if self._failure is None:
                self._progress()

    def wait_for(self, work: P2PWork, seconds=None):
        """Progress until `work` completes; raises the runtime's timeout or dead-peer errors. With
        `seconds`, a wait for this work alone: when they pass, ShmemTimeoutError is raised and the
        work stays posted (the engine and its other works go on)."""
        deadline = None if seconds is None else time.monotonic() + seconds
        while not work.done:
            with self._lock:
                self._raise_failure()
                bell = _C.signal_fetch(self._doorbell, 8)
                while self._progress():
                    pass
                if work.done:
                    return
            if deadline is None:
                try:
                    _C.wait_until(self._doorbell, 8, _GT, bell, "hpshmem point-to-point doorbell", self._team)
                except Exception as e:
                    self._fail(e)
                    raise
                continue
            left = deadline - time.monotonic()
            if left <= 0:
                raise _C.ShmemTimeoutError(
                    f"hpshmem point-to-point: the operation did not complete within {seconds:g} s"
                )
            previous = _C.set_thread_wait_timeout(left)
            try:
                _C.wait_until(self._doorbell, 8, _GT, bell, "hpshmem point-to-point doorbell", self._team)
            except _C.ShmemTimeoutError:
                pass  # the loop names the deadline
            except Exception as e:
                self._fail(e)
                raise
            finally:
                _C.set_thread_wait_timeout(previous)

    def _fail(self, e):
        with self._lock:
            if self._failure is None:
                self._failure = e
            for q in self._queues:
                while q:
                    q.popleft().work._finish(e)
            for r in self._posted:
                r.work._finish(e)
            self._posted.clear()

    def _raise_failure(self):
        if self._failure is not None:
            raise self._failure

    def _ensure_thread(self):
        with self._lock:
            if self._thread is None and not self._closed:
                self._thread = threading.Thread(target=self._run, name="hpshmem-p2p", daemon=True)
                self._thread.start()

    def _run(self):
        """Progress while anything is pending; the thread ends when nothing is."""
        try:
            while True:
                with self._lock:
                    if self._closed or self._failure is not None:
                        return
                    bell = _C.signal_fetch(self._doorbell, 8)
                    while self._progress():
                        pass
                    if not self._pending():
                        return
                _C.wait_until(self._doorbell, 8, _GT, bell, "hpshmem point-to-point doorbell", self._team)
        except Exception as e:  # noqa: BLE001 (handed to every pending work)
            if not self._closed:
                self._fail(e)
        finally:
            with self._lock:
                self._thread = None
                restart = not self._closed and self._failure is None and self._pending()
            if restart:  # something was posted between the last pass and the exit
                self._ensure_thread()

    def close(self):
        with self._lock:
            self._closed = True
            t = self._thread
        if t is not None and _C.is_initialized():
            try:
                _C.signal(self._doorbell, 8, 1, _ADD, self._pes[self._me])  # wake it
            except Exception:  # noqa: BLE001 (the runtime is going away; the thread ends with it)
                pass
            t.join(timeout=5)


def ctypes_array(addr: int, n: int):
    import ctypes

    return (ctypes.c_uint8 * n).from_address(addr)
