"""One effect of a built-in target through the Python host, in a process of its own, for the
tests that SIGKILL it mid-send (``python worker.py JOURNAL SERVICE WHERE DEFINITION EFFECT
KEY``: SERVICE is postgres, git or smtp, WHERE its URL, repository or host:port). It prints
the outcome's state if it lives to."""

from __future__ import annotations

import json
import sys
from typing import Any

from interlock import Interlock
from interlock.services import GitRepository, Postgres, Smtp, builtin


def client(service: str, where: str) -> Any:
    if service == "postgres":
        return Postgres(where)
    if service == "git":
        return GitRepository(where)
    host, port = where.rsplit(":", 1)
    return Smtp(host, int(port))


def main() -> None:
    journal, service, where, definition, effect, key = sys.argv[1:7]
    d = json.loads(definition)
    with Interlock(journal) as gate:
        fn = builtin(gate, d.pop("builtin"), client(service, where), **d)
        print(fn(json.loads(effect), key=key).status, flush=True)


if __name__ == "__main__":
    main()
