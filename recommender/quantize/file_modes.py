"""Permissions of a written checkpoint: what a new file or folder gets under the user's umask.

Some writers choose their own, stricter modes (the staging folder comes from ``mkdtemp``, 0700;
the compressed ``model.safetensors`` arrives 0600 while config.json and the tokenizer are 0644),
so a serving container running as another user could read the config but not the weights. Every
checkpoint the tool hands over is therefore given the modes an ordinary ``open``/``mkdir`` would
have given it: 0666 and 0777 less the umask — the same for every file, never wider than the user asked.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path


def current_umask() -> int:
    """The process's umask (read by setting it and putting it back: the only portable way)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def apply_umask_modes(root: Path) -> None:
    """Give `root` and everything under it the modes a plain create would: 0666 / 0777 less the umask."""
    mask = current_umask()
    file_mode, dir_mode = 0o666 & ~mask, 0o777 & ~mask
    paths = [root, *root.rglob("*")]
    for path in paths:
        mode = path.lstat().st_mode
        if stat.S_ISDIR(mode):
            path.chmod(dir_mode)
        elif stat.S_ISREG(mode):
            path.chmod(file_mode)
