"""What the gate adds to one effect of each built-in target that is not an SDK's, against the
same real service: a PostgreSQL insert, a git commit, an email over SMTP, each made directly
(the way a program does without the gate) and through the Python host
(``interlock.services.builtin``, a file journal, fsync on), interleaved in one run; the
median and p90 per effect, and the difference.

    python experiments/targets/bench.py [--effects 100]      # prints the table for results/targets.md
    python experiments/targets/bench.py --quick              # CI: a few effects, checks they landed

Direct calls: PostgreSQL, one INSERT in its own transaction (psycopg); git, one
``git fast-import`` run of the same commit on the branch's tip; SMTP, ``smtplib`` sendmail
of the same message. Through the gate each effect also reads its premises (PostgreSQL: the
two queries; git: the file's blob at the base), writes PROPOSED, AUTHORIZED and DISPATCHED
(one fsync) and COMMITTED, and, for SMTP, speaks the dialogue through the component.
"""

from __future__ import annotations

import argparse
import os
import shutil
import smtplib
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, List

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "hosts" / "python" / "tests"
sys.path.insert(0, str(TESTS))
sys.path.insert(0, str(TESTS / "targets"))

from worlds import GitWorld, PgWorld, SmtpWorld  # noqa: E402

from interlock import Interlock  # noqa: E402
from interlock.services import GitRepository, Postgres, Smtp, builtin  # noqa: E402
from sql_backends import Cluster  # noqa: E402


class Timed:
    """A client whose calls' time is added up (``spent``, ms): what of a gated effect is
    the service's."""

    def __init__(self, client: Any):
        self.client, self.service, self.spent, self.calls = client, client.service, 0.0, 0

    def call(self, *args: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return self.client.call(*args)
        finally:
            self.spent += (time.perf_counter() - t0) * 1000
            self.calls += 1


def timed(fn: Callable[[int], Any], n: int) -> List[float]:
    out = []
    for i in range(n):
        t0 = time.perf_counter()
        fn(i)
        out.append((time.perf_counter() - t0) * 1000)
    return out


def pair(direct: Callable[[int], Any], gated: Callable[[int], Any], n: int) -> Dict[str, List[float]]:
    """Both, interleaved in rounds of 5, so the machine's load falls on both alike."""
    d: List[float] = []
    g: List[float] = []
    for r in range(0, n, 5):
        k = min(5, n - r)
        d += timed(lambda i, r=r: direct(r + i), k)
        g += timed(lambda i, r=r: gated(r + i), k)
    return {"direct": d, "gated": g}


def postgres(cluster: Cluster, journal: Path, n: int) -> Dict[str, List[float]]:
    import psycopg

    world = PgWorld(cluster)
    world.sql("UPDATE orders SET paid_cents = 100000000")
    conn = psycopg.connect(world.url, autocommit=True)

    def direct(i: int) -> None:
        with conn.transaction():
            conn.execute("INSERT INTO refunds (order_id, amount_cents) VALUES ('order_881', 1)")

    with Interlock(str(journal)) as gate:
        client = Timed(Postgres(world.url))
        insert = builtin(gate, "postgres.insert", client, target="refunds-db")

        def gated(i: int) -> None:
            o = insert(world.effect(1), key=f"refund:{i}")
            assert str(o.status) == "COMMITTED", o

        times = pair(direct, gated, n)
    conn.close()
    assert world.count() == 2 * n
    return dict(times, spent=[client.spent / n], calls=[client.calls / n])


def git(root: Path, journal: Path, n: int) -> Dict[str, List[float]]:
    world = GitWorld(root)

    def direct(i: int) -> None:
        text = f"direct {i}\n"
        stream = (f"commit refs/heads/main\ncommitter Bench <b@x> now\ndata 7\ndirect\n"
                  f"from refs/heads/main^0\nM 100644 inline direct.txt\ndata {len(text)}\n{text}\n")
        subprocess.run(["git", "-C", str(world.repo), "fast-import", "--quiet", "--date-format=now"],
                       input=stream, text=True, check=True, capture_output=True)

    with Interlock(str(journal)) as gate:
        client = Timed(GitRepository(world.repo))
        commit = builtin(gate, "git.commit", client, target="repo")

        def gated(i: int) -> None:
            effect = {"branch": "main", "files": {"gated.txt": f"gated {i}\n"}, "message": "gated"}
            o = commit(effect, key=f"commit:{i}")
            assert str(o.status) == "COMMITTED", o

        times = pair(direct, gated, n)
    assert world.count() == n
    return dict(times, spent=[client.spent / n], calls=[client.calls / n])


def smtp(root: Path, journal: Path, n: int) -> Dict[str, List[float]]:
    world = SmtpWorld(root)
    try:
        def direct(i: int) -> None:
            with smtplib.SMTP(world.host, world.port) as s:
                s.sendmail("support@shop.test", ["customer@example.test"],
                           f"Subject: direct {i}\r\n\r\nYour refund is on its way.\r\n")

        with Interlock(str(journal)) as gate:
            client = Timed(Smtp(world.host, world.port))
            email = builtin(gate, "smtp.send", client, target="mail")

            def gated(i: int) -> None:
                o = email(world.effect(), key=f"notify:{i}")
                assert str(o.status) == "COMMITTED", o

            times = pair(direct, gated, n)
        assert world.count() == 2 * n
        return dict(times, spent=[client.spent / n], calls=[client.calls / n])
    finally:
        world.stop()


def row(name: str, t: Dict[str, List[float]]) -> str:
    def q(xs: List[float], p: float) -> float:
        return statistics.quantiles(xs, n=100)[int(p) - 1] if len(xs) > 1 else xs[0]

    d, g = statistics.median(t["direct"]), statistics.median(t["gated"])
    mean = statistics.mean(t["gated"])
    return (f"| {name} | {len(t['gated'])} | {d:.1f} (p90 {q(t['direct'], 90):.1f}) | "
            f"{g:.1f} (p90 {q(t['gated'], 90):.1f}) | +{g - d:.1f} | {t['calls'][0]:.0f}, {t['spent'][0]:.1f} "
            f"| {mean - t['spent'][0]:.1f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--effects", type=int, default=100)
    ap.add_argument("--quick", action="store_true", help="5 effects each; check they landed")
    a = ap.parse_args()
    n = 5 if a.quick else a.effects
    tmp = Path(tempfile.mkdtemp(prefix="interlock-targets-bench-"))
    cluster = Cluster()
    try:
        results = {
            "postgres.insert": postgres(cluster, tmp / "j-pg", n),
            "git.commit": git(tmp / "git", tmp / "j-git", n),
            "smtp.send": smtp(tmp / "smtp", tmp / "j-smtp", n),
        }
    finally:
        cluster.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}; ms per effect, median (p90)\n")
    print("| target | effects | direct | through the gate (Python host) | added (medians) "
          "| service calls per gated effect, ms in them (mean) | the rest: the gate, its journal, the crossings (mean) |")
    print("|---|---|---|---|---|---|---|")
    for name, t in results.items():
        print(row(name, t))


if __name__ == "__main__":
    main()
