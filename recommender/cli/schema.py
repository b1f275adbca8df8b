"""`recommender schema`: the JSON Schema of a search-space file."""

from __future__ import annotations

import json

__all__ = ["EPILOG", "schema_command"]

EPILOG = "Exit codes: 0 printed."


def schema_command() -> None:
    """Print the JSON Schema of a search-space file (for an editor's YAML checks; `search` checks the rest)."""
    from recommender.config.spec import spec_json_schema

    print(json.dumps(spec_json_schema(), indent=2))
