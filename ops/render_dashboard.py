"""`python -m ops.render_dashboard TEMPLATE PNG`: draw a synthesized dashboard's layout as a picture.

Reads the `AWS::CloudWatch::Dashboard` of a synthesized template (cdk.out/*.template.json), resolves its
body (references become the resource's logical id), and draws every widget where CloudWatch places it on
its 24-column grid, with its title and the series it plots. No AWS account: this shows what the operator
will find, not live data.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

GRID_COLUMNS = 24
ROW_UNITS_PER_COLUMN = 1.0  # one grid row is drawn as tall as one column is wide
KIND_COLOURS = {"metric": "#e8f0fb", "alarm": "#fdecea", "text": "#f3f3f3"}


@dataclass(frozen=True)
class WidgetBox:
    x: int
    y: int
    width: int
    height: int
    kind: str
    title: str
    series: tuple[str, ...]


def _resolve(value: Any) -> str:
    """A CloudFormation string expression -> text: Fn::Join parts, references as <LogicalId>."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        if "Fn::Join" in value:
            separator, parts = value["Fn::Join"]
            return separator.join(_resolve(part) for part in parts)
        if "Ref" in value:
            return f"<{value['Ref']}>"
        if "Fn::GetAtt" in value:
            return f"<{value['Fn::GetAtt'][0]}>"
        if "Fn::Select" in value:  # a part of a resource's name or ARN: show which resource
            return _resolve(value["Fn::Select"][1])
        if "Fn::Split" in value:
            return _resolve(value["Fn::Split"][1])
    raise ValueError(f"cannot resolve {value!r} in a dashboard body")


def dashboard_body(template: dict[str, Any]) -> dict[str, Any]:
    """The first dashboard's body, parsed."""
    for resource in template.get("Resources", {}).values():
        if resource.get("Type") == "AWS::CloudWatch::Dashboard":
            return json.loads(_resolve(resource["Properties"]["DashboardBody"]))
    raise ValueError("the template has no AWS::CloudWatch::Dashboard")


def _series_label(metric: list[Any]) -> str:
    """A widget's metric array -> a short label: the rendering options' label, else the metric name."""
    options = metric[-1] if metric and isinstance(metric[-1], dict) else {}
    if "label" in options:
        return str(options["label"])
    if "expression" in options:
        return str(options["expression"])
    names = [part for part in metric if isinstance(part, str)]
    stat = options.get("stat", "")
    return f"{names[1] if len(names) > 1 else names[0]} {stat}".strip()


def _alarm_label(alarm: str) -> str:
    """An alarm's ARN as resolved here (<LogicalId>, a name for composites) -> a readable name."""
    name = alarm.strip("<>").rsplit(":", 1)[-1]
    return re.sub(r"[0-9A-F]{8}$", "", name)  # CDK's logical-id hash suffix


def widget_boxes(body: dict[str, Any]) -> list[WidgetBox]:
    boxes = []
    for widget in body.get("widgets", []):
        properties = widget.get("properties", {})
        if widget["type"] == "alarm":
            series: tuple[str, ...] = tuple(_alarm_label(alarm) for alarm in properties.get("alarms", []))
        else:
            series = tuple(_series_label(metric) for metric in properties.get("metrics", []))
        boxes.append(
            WidgetBox(
                x=widget["x"],
                y=widget["y"],
                width=widget["width"],
                height=widget["height"],
                kind=widget["type"],
                title=properties.get("title", ""),
                series=series,
            )
        )
    return boxes


def render(boxes: list[WidgetBox], title: str, output: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyBboxPatch

    rows = max(box.y + box.height for box in boxes)
    figure, axes = plt.subplots(figsize=(16, 16 * rows / GRID_COLUMNS + 0.6))
    axes.set_xlim(0, GRID_COLUMNS)
    axes.set_ylim(rows, 0)
    axes.axis("off")
    axes.set_title(title, loc="left", fontsize=13, fontweight="bold")
    for box in boxes:
        axes.add_patch(
            FancyBboxPatch(
                (box.x + 0.1, box.y + 0.1),
                box.width - 0.2,
                box.height - 0.2,
                boxstyle="round,pad=0,rounding_size=0.15",
                facecolor=KIND_COLOURS.get(box.kind, "#ffffff"),
                edgecolor="#7a8799",
            )
        )
        heading = "\n".join(textwrap.wrap(box.title, width=max(12, box.width * 6)))
        axes.text(box.x + 0.35, box.y + 0.35, heading, va="top", fontsize=8.5, fontweight="bold")
        lines = heading.count("\n") + 1
        # Series in columns of at most a box's height of lines, as many columns as the width allows.
        per_column = max(1, int(box.height * 2.2) - lines - 1)
        columns = max(1, box.width // 6)
        shown = list(box.series[: per_column * columns])
        for column in range(columns):
            labels = shown[column * per_column : (column + 1) * per_column]
            if not labels:
                break
            axes.text(
                box.x + 0.45 + column * box.width / columns,
                box.y + 0.45 + 0.45 * lines,
                "\n".join(f"- {label}" for label in labels),
                va="top",
                fontsize=7,
                color="#333333",
            )
    figure.tight_layout()
    figure.savefig(output, dpi=110)
    plt.close(figure)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("template", type=Path, help="a synthesized template, e.g. cdk.out/NAME.template.json")
    parser.add_argument("output", type=Path, help="the PNG to write")
    args = parser.parse_args(argv)
    try:
        template = json.loads(args.template.read_text(encoding="utf-8"))
        body = dashboard_body(template)
    except (OSError, ValueError) as error:
        print(f"render_dashboard: {args.template}: {error}", file=sys.stderr)
        return 1
    render(
        widget_boxes(body),
        f"CloudWatch dashboard of {args.template.name.removesuffix('.template.json')}",
        args.output,
    )
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
