"""Cells: a region split into independent serving units, each its own ALB, ECS cluster, fleets and alarms
(its own stack). A cell is one blast radius and stays inside the ALB and ECS quotas; a region of one cell
is the kit as it always was, with the region's names.

Names are decided here once: `name` is what routing and rehearsal scenarios call a cell (`us-east-1/2`),
`slug` what AWS resource names hold (`us-east-1-cell2`). For a one-cell region both are the region."""

from __future__ import annotations

from dataclasses import dataclass

CELL_SEPARATOR = "/"


@dataclass(frozen=True, order=True)
class Cell:
    region: str
    index: int  # 1-based
    count: int  # cells in the region

    @property
    def name(self) -> str:
        return self.region if self.count == 1 else f"{self.region}{CELL_SEPARATOR}{self.index}"

    @property
    def slug(self) -> str:
        return self.region if self.count == 1 else f"{self.region}-cell{self.index}"

    @property
    def suffix(self) -> str:
        """What a cell adds to the region's stack name, construct ids and namespaces: nothing for a one-cell
        region and for cell 1, so a region grown to more cells keeps its first stack (docs/peak-events.md,
        Cells)."""
        return "" if self.index == 1 else f"-cell{self.index}"


def split_hosts(total: int, count: int) -> tuple[int, ...]:
    """A region's host bound over its cells as evenly as whole hosts allow, the first cells taking the
    remainder; the parts add up to the total."""
    base, extra = divmod(total, count)
    return tuple(base + (1 if index < extra else 0) for index in range(count))


def region_of(name: str) -> str:
    """The region a routing name (`us-east-1` or `us-east-1/2`) belongs to."""
    return name.split(CELL_SEPARATOR, 1)[0]


def cells_needed(hosts: int, cell_max_hosts: int) -> int:
    """Fewest cells that keep every cell at or below cell_max_hosts."""
    return max(1, -(-hosts // cell_max_hosts))
