"""One name per type: no two public classes of the package share a name, so a reader (and an import) cannot take
one for the other (the catalog's price-set entry and the recommendation's record of a price were both
`GpuPrice`; the latter is now `decision.assumptions.PriceAssumption`)."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).parents[1] / "recommender"


def public_classes(package: Path) -> dict[str, list[str]]:
    """Each public top-level class name in `package` and the modules defining it."""
    found: dict[str, list[str]] = defaultdict(list)
    for path in sorted(package.rglob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                found[node.name].append(str(path.relative_to(package.parent)))
    return found


def test_no_two_public_classes_share_a_name() -> None:
    shared = {name: where for name, where in public_classes(PACKAGE).items() if len(where) > 1}
    assert not shared, f"classes defined twice: {shared}"


def test_the_check_sees_a_duplicate(tmp_path: Path) -> None:
    for name in ("a.py", "b.py"):
        (tmp_path / name).write_text("class GpuPrice:\n    pass\n", encoding="utf-8")
    assert public_classes(tmp_path)["GpuPrice"] == [f"{tmp_path.name}/a.py", f"{tmp_path.name}/b.py"]
