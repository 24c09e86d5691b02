"""benchmarks/bench_serve.py's server CPU a request: its denominator is every request the study
server answered while the CPU was measured, counted against the server's own count."""
import importlib.util
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def _bench():
    path = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_serve.py"
    spec = importlib.util.spec_from_file_location("bench_serve_under_test", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cpu_a_request_counts_both_static_peers_requests():
    """Both static peers (a reused connection, and a new connection each fetch) run against a
    server that counts what it answers; the benchmark's denominator equals the participants'
    requests plus that count (the old one left out the new-connection peer's)."""
    bench = _bench()
    answered, ports = [], set()
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"   # keep-alive, as uvicorn: the first peer reuses its connection

        def do_GET(self):
            body = b"body{}"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            with lock:
                answered.append(self.path)
                ports.add(self.client_address[1])

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    serving = threading.Thread(target=server.serve_forever, daemon=True)
    serving.start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        stop, peer, fresh = threading.Event(), [], []
        sides = [threading.Thread(target=lambda: peer.extend(bench.static_latencies(url, stop, 0.01))),
                 threading.Thread(target=lambda: fresh.extend(bench.fresh_static_latencies(url, stop, 0.02)))]
        for side in sides:
            side.start()
        # until both peers have fetched (the new-connection one from ports of its own), not a fixed
        # time: on a loaded machine a peer's first fetch (httpx's import) can take longer than 0.4 s
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with lock:
                if len(ports) >= 3 and len(answered) >= 6:
                    break
            time.sleep(0.05)
        time.sleep(0.1)
        stop.set()
        for side in sides:
            side.join()
    finally:
        server.shutdown()
        server.server_close()
    participants = 37
    assert len(peer) > 0 and len(fresh[0]) > 0
    assert answered.count("/static/satcal.css") == len(answered)
    assert bench.cpu_requests(participants, peer, fresh) == participants + len(answered)
    # without the new-connection peer running, only the participants' and the first peer's
    assert bench.cpu_requests(participants, peer, []) == participants + len(peer)


def test_stacks_refused_in_one_line_before_anything_runs(capsys):
    """``--stacks`` checked by argparse: a stack that is not LOOP/HTTP, or names an unknown
    loop, exits 2 with one line naming it (before, server_stack's error surfaced as a
    traceback after the workspace was made); a valid one resolves as server_stack does."""
    import pytest

    from satcal.study.hosting import server_stack
    bench = _bench()
    for bad, said in (("asyncio/h11/x", "'asyncio/h11/x': expected LOOP/HTTP"), ("tokio/h11", "loop must be one of")):
        with pytest.raises(SystemExit) as stopped:
            bench.main(["--stacks", bad])
        assert stopped.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert said in err[-1] and "Traceback" not in "\n".join(err)
    assert bench.stack_argument("asyncio/h11") == ("asyncio", "h11")
    assert bench.stack_argument("auto") == server_stack("auto", "auto")


def test_client_collector_paused_only_while_participants_run():
    """``client_collector("paused")`` turns the client's cyclic collector off inside and back on
    after, also when the block raises; "on" leaves it on; a caller that had it off keeps it off.
    The check reads gc.isenabled() and whether a reference cycle made inside is freed by the
    collector's own threshold (it is not while paused)."""
    import gc
    import weakref

    import pytest
    bench = _bench()

    class Node:
        pass

    assert gc.isenabled()
    with bench.client_collector("paused"):
        assert not gc.isenabled()
        node = Node()
        node.self = node
        alive = weakref.ref(node)
        del node
        kept = [Node() for _ in range(3 * gc.get_threshold()[0])]  # would trigger a young collection
        assert alive() is not None   # no automatic collection ran
    assert gc.isenabled()
    gc.collect()
    assert alive() is None
    with pytest.raises(RuntimeError):
        with bench.client_collector("paused"):
            raise RuntimeError("participant failed")
    assert gc.isenabled()
    with bench.client_collector("on"):
        assert gc.isenabled()
        # counts reset: no young collection can move the node to an older generation while it
        # is still referenced (one would leave it to a later, rarer collection: a flaky assert)
        gc.collect()
        node = Node()
        node.self = node
        alive = weakref.ref(node)
        del node
        kept = [Node() for _ in range(3 * gc.get_threshold()[0])]
        assert alive() is None       # the same allocations did collect it with the collector on
    del kept
    gc.disable()
    try:
        with bench.client_collector("paused"):
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_the_blocks_median_interval_is_the_sign_tests():
    """The interval printed for the median of the blocks' ratios: order statistics (3, 10) of 12
    with coverage 0.9614 and (4, 13) of 16 with 0.9787 (the sign test's, as tabled for the
    median, e.g. Campbell and Gardner 1988), the coverage checked against scipy's binomial; too
    few blocks for 95% give no interval."""
    import math

    import numpy as np
    from scipy.stats import binom
    bench = _bench()
    rng = np.random.default_rng(24)
    for n, (lo, hi) in ((12, (3, 10)), (16, (4, 13))):
        x = rng.lognormal(0, 0.2, n)
        m, low, high, cover = bench.median_interval(x)
        s = np.sort(x)
        assert (m, low, high) == (np.median(x), s[lo - 1], s[hi - 1])
        assert math.isclose(cover, 1 - 2 * binom.cdf(lo - 1, n, 0.5))
    m, low, high, cover = bench.median_interval([1.0, 2.0, 3.0, 4.0, 5.0])
    assert m == 3.0 and math.isnan(low) and math.isnan(high) and math.isnan(cover)


def test_the_against_arms_server_runs_the_named_copy(tmp_path):
    """``--against SRC``: inside the ``with`` a child process (as ``satcal serve`` is started)
    gets PYTHONPATH = SRC; afterwards the environment is as it was."""
    import os
    import subprocess
    import sys
    bench = _bench()
    before = os.environ.get("PYTHONPATH")
    with bench._ServerPath(str(tmp_path)):
        seen = subprocess.run([sys.executable, "-c", "import os; print(os.environ['PYTHONPATH'])"],
                              capture_output=True, text=True).stdout.strip()
    assert seen == str(tmp_path)
    assert os.environ.get("PYTHONPATH") == before
