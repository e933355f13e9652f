"""A real SMTP server for the email target's tests: aiosmtpd's SMTP protocol, run as its
own process (``python smtp_server.py DIR``: it prints the port it listens on, then serves
until killed). Every message it takes is delivered to ``DIR/mail/<n>.eml`` (written whole,
then renamed) before it answers; a fault armed as a file ``DIR/faults/<name>`` fires once:

- ``reject_rcpt``: the next RCPT is answered 550 (nothing delivered);
- ``refuse_data``: the next message is not delivered and is answered 451;
- ``drop_after_data``: the next message is delivered, then the connection is closed with
  no answer (a dropped connection after DATA);
- ``hang_after_data``: the next message is delivered, then no answer for an hour (a
  timeout after the request was sent);
- ``malformed_after_data``: the next message is delivered, then answered ``OK thanks``
  (not an SMTP reply).
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

from aiosmtpd.smtp import SMTP


class Mailbox:
    def __init__(self, root: Path):
        self.mail = root / "mail"
        self.faults = root / "faults"
        self.mail.mkdir(parents=True, exist_ok=True)
        self.faults.mkdir(parents=True, exist_ok=True)

    def trip(self, fault: str) -> bool:
        try:
            os.unlink(self.faults / fault)
            return True
        except FileNotFoundError:
            return False

    def deliver(self, content: bytes) -> None:
        n = len(list(self.mail.glob("*.eml"))) + 1
        tmp = self.mail / f".{n}.tmp"
        tmp.write_bytes(content)
        os.replace(tmp, self.mail / f"{n}.eml")

    async def handle_RCPT(self, server: Any, session: Any, envelope: Any, address: str,  # noqa: N802 - aiosmtpd's name
                          options: Any) -> str:
        if self.trip("reject_rcpt"):
            return "550 5.1.1 no such user here"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802 - aiosmtpd's name
        if self.trip("refuse_data"):
            return "451 4.3.0 try again later"
        self.deliver(envelope.original_content)
        if self.trip("drop_after_data"):
            server.transport.close()
            return "250 OK"  # never reaches the client
        if self.trip("hang_after_data"):
            await asyncio.sleep(3600)
        if self.trip("malformed_after_data"):
            return "OK thanks"
        return "250 2.0.0 OK: queued"


async def main(root: Path) -> None:
    box = Mailbox(root)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: SMTP(box, hostname="mx.test"), "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1])))
