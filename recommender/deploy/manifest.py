"""Kubernetes manifests as YAML-ready data, and the one dumper every deployment file is written with."""

from __future__ import annotations

from typing import Any

import yaml

__all__ = ["Manifest", "dump"]

#: A Kubernetes manifest (or a part of one) as YAML-ready data.
Manifest = dict[str, Any]


class _Dumper(yaml.SafeDumper):
    """Writes a multi-line string (a container's script) as a literal block, as the guides write it."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None)


_Dumper.add_representer(str, _str)


def dump(*documents: Manifest) -> str:
    return yaml.dump_all(documents, Dumper=_Dumper, sort_keys=False)
