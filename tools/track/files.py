"""Result files are whole or absent; standard library only, so the peer runner (in its own
virtual environment, without scipy) writes its files the same way."""

from __future__ import annotations

import os
import tempfile


def write_atomic(path: str, data: str) -> None:
    """Writes a whole file or nothing: a temporary file in the same folder, then rename."""
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".tbd_track.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(data)
        # mkstemp makes the file 0600; outputs are for reading (CI artifacts, web folders):
        # the permissions an ordinary file gets under the umask.
        mask = os.umask(0o022)
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
