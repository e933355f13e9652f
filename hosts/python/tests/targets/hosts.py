"""One built-in target's effect driven through a host, the same way for each: the Python
host (``interlock.services.builtin``, in this process) and the CLI host (``interlock
effect``, a process per call). A crash is the gate's own injection (``crash_at``): the
Python gate raises and is dropped, the CLI process aborts; ``restart()`` is the next
process. Outcomes come back as :func:`worlds.outcome_of` dicts."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any, Dict, List, Optional

from worlds import outcome_of

from interlock import Interlock, SimulatedCrash
from interlock.services import GitRepository, Postgres, Smtp, builtin

CRASHED = "crashed"

LEASE = "case-4471"

DEFINITIONS: Dict[str, Dict[str, Any]] = {
    "postgres": {"builtin": "postgres.insert", "target": "refunds-db", "lease": LEASE, "timeout_ms": 800},
    "git": {"builtin": "git.commit", "target": "repo", "lease": LEASE, "timeout_ms": 1000},
    "smtp": {"builtin": "smtp.send", "target": "mail", "lease": LEASE, "timeout_ms": 1000},
}

KEY = "task:4471"


def client_of(world: Any) -> Any:
    if world.service == "postgres":
        return Postgres(world.url)
    if world.service == "git":
        return GitRepository(world.repo)
    return Smtp(world.host, world.port)


class PythonHost:
    name = "python"

    def __init__(self, journal: Path, world: Any, definition: Dict[str, Any]):
        self.journal, self.world, self.definition = journal, world, definition
        self.gate: Optional[Interlock] = None
        self.restart()

    def restart(self) -> None:
        if self.gate is not None:
            self.gate.close()
        self.gate = Interlock(str(self.journal))
        d = dict(self.definition)
        self.effect = builtin(self.gate, d.pop("builtin"), client_of(self.world), **d)

    def close(self) -> None:
        if self.gate is not None:
            self.gate.close()
            self.gate = None

    def lease(self, name: str) -> None:
        assert self.gate is not None
        self.gate.lease(name, 3600)

    def revoke(self, name: str) -> None:
        assert self.gate is not None
        self.gate.revoke_lease(name)

    def propose(self, effect: Dict[str, Any], key: str) -> Dict[str, Any]:
        return self.effect.proposal(effect, key=key)

    def submit(self, proposal: Dict[str, Any], crash: Optional[str] = None) -> Any:
        assert self.gate is not None
        try:
            return outcome_of(self.gate.submit(proposal, crash_after_effect=crash == "after-send",
                                               crash_before_effect=crash == "before-send"))
        except SimulatedCrash:
            self.restart()
            return CRASHED

    def call(self, effect: Dict[str, Any], key: str, crash: Optional[str] = None,
             approval: Optional[str] = None) -> Any:
        if crash is None and approval is None:
            return outcome_of(self.effect(effect, key=key))
        p = self.effect.proposal(effect, key=key)
        if approval is not None:
            p["authority"] = {"approval": approval}
        return self.submit(p, crash)

    def approve(self, approval: str, approver: str, proposal: Dict[str, Any]) -> None:
        assert self.gate is not None
        self.gate.approve(approval, approver, proposal)

    def recover(self) -> List[Dict[str, Any]]:
        assert self.gate is not None
        return [outcome_of(o) for o in self.gate.recover()]


class CliHost:
    name = "cli"

    def __init__(self, cli: Path, journal: Path, world: Any, definition: Dict[str, Any]):
        self.cli, self.journal, self.world = cli, journal, world
        self.definition = json.dumps(definition)
        journal.mkdir(parents=True, exist_ok=True)
        if world.service == "postgres":
            self.service = ["--postgres", world.url]
        elif world.service == "git":
            self.service = ["--repo", str(world.repo)]
        else:
            self.service = ["--smtp", f"{world.host}:{world.port}"]

    def restart(self) -> None:
        pass  # every call is a new process

    def close(self) -> None:
        pass

    def _run(self, *args: str, ok: tuple = (0, 1)) -> Any:
        out = subprocess.run([str(self.cli), "--json", *args], capture_output=True, text=True, timeout=120)
        if out.returncode == -6 or out.returncode == 134:  # abort(): the gate's crash
            return CRASHED
        if out.returncode not in ok:
            raise RuntimeError(f"interlock {args[0]} failed ({out.returncode}): {out.stdout} {out.stderr}")
        return json.loads(out.stdout) if out.stdout.strip() else None

    def _effect(self, *args: str) -> Any:
        return self._run("effect", str(self.journal), *self.service, "--definition", self.definition, *args)

    def lease(self, name: str) -> None:
        self._run("lease", "grant", str(self.journal), name, "--for", "1h", ok=(0,))

    def revoke(self, name: str) -> None:
        self._run("lease", "revoke", str(self.journal), name, ok=(0,))

    def propose(self, effect: Dict[str, Any], key: str) -> Dict[str, Any]:
        return dict(self._effect("--key", key, "--propose", json.dumps(effect)))

    def submit(self, proposal: Dict[str, Any], crash: Optional[str] = None) -> Any:
        out = self._effect("--proposal", json.dumps(proposal), *(["--crash-at", crash] if crash else []))
        return out if out == CRASHED else outcome_of(out)

    def call(self, effect: Dict[str, Any], key: str, crash: Optional[str] = None,
             approval: Optional[str] = None) -> Any:
        extra = (["--crash-at", crash] if crash else []) + (["--approval", approval] if approval else [])
        out = self._effect("--key", key, *extra, json.dumps(effect))
        return out if out == CRASHED else outcome_of(out)

    def approve(self, approval: str, approver: str, proposal: Dict[str, Any]) -> None:
        doc = {"approval": approval, "approver": approver,
               "request": {"key": proposal["key"], "effect": proposal["effect"]},
               "premises_seen": proposal["premises"]}
        path = self.journal.parent / f"{approval}.json"
        path.write_text(json.dumps(doc))
        self._run("approve", str(self.journal), str(path), ok=(0,))

    def recover(self) -> List[Dict[str, Any]]:
        return [outcome_of(o) for o in self._effect()]

