"""Keys for proof for outsiders: Ed25519 in the C2SP signed-note encoding, read from a file
or the environment. This module only reads text; the component parses and checks every
key (a malformed or wrong-half key raises :class:`interlock.BadKey` there). A key is never
logged or put in an error message."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional, Union

from .errors import BadKey

#: The environment variables the servers read (``INTERLOCK_SIGNING_KEY``) and a checker may.
SIGNING_KEY_ENV = "INTERLOCK_SIGNING_KEY"
PUBLIC_KEY_ENV = "INTERLOCK_PUBLIC_KEY"


def read_key(file: Union[str, Path, None] = None, env: Optional[str] = None, *, what: str = "key") -> str:
    """The key's text from ``file``, else from the environment variable ``env``."""
    if file is not None:
        try:
            return Path(file).read_text(encoding="utf-8")
        except OSError as e:
            raise BadKey(f"cannot read the {what} file {file}: {e.strerror}") from None
    if env is not None:
        text = os.environ.get(env, "")
        if not text:
            raise BadKey(f"the environment variable {env} holds no {what}")
        return text
    raise BadKey(f"give the {what}: a file, or an environment variable")


def write_private_key(path: Union[str, Path], signer: str) -> None:
    """Writes a private key to a new file, owner-only (0600); an existing file is never
    overwritten."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(signer + "\n")
        f.flush()
        os.fsync(f.fileno())
