"""A scenario file in, the minutes and the verdict out: load, cross-check against the config, synthesize,
run the loop, judge, report."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from gameday.deploy_day import DeployDay, DeployRecord
from gameday.loop import PROFILE_ENDS, Minute, Twin
from gameday.report import json_line, plot
from gameday.scenario import CapacityShortage, Scenario, load_scenario
from gameday.templates import TemplateError, read_deployment, synthesize
from gameday.verdict import (
    Rules,
    Summary,
    compare,
    deploy_violations,
    judge,
    with_deploy_violations,
    with_revision_faults,
)
from orchestrator.routing.config import parse_config
from settings.cells import region_of
from settings.loader import ConfigError, Document, load_settings, locate
from settings.schema import Settings
from stacks.routing_names import policy_params


class BadScenario(Exception):
    """The scenario (or the config it names) cannot be run; str() names file, line and key."""


@dataclass(frozen=True)
class Result:
    scenario: Scenario
    minutes: list[Minute]
    summary: Summary
    profile: str = "nominal"  # which end of the profiles' throughput range the serving curves ran at
    without_orchestrator: Summary | None = None  # the counterfactual day, when it ran
    rules: Rules | None = None  # what the verdict judged against
    deploys: tuple[DeployRecord, ...] = ()  # what each scheduled deploy did (gameday/deploy_day.py)


def check_against_config(scenario: Scenario, document: Document, settings: Settings, config: Path) -> None:
    problems = []
    known = ", ".join(settings.regions)
    # A fault may name a region (all its cells) or one cell of a region of several (`us-east-1/2`).
    cells = [cell.name for cell in settings.all_cells if cell.count > 1]
    targets = ", ".join([*settings.regions, *cells])
    for region in scenario.traffic:
        if region not in settings.regions:
            problems.append(locate(document, ("traffic", region), f"not a region of {config} ({known})"))
    for index, fault in enumerate(scenario.faults):
        region = getattr(fault, "region", None)
        if region is not None and region not in settings.regions and region not in cells:
            problems.append(
                locate(document, ("faults", index, "region"), f"not a region or cell of {config} ({targets})")
            )
        elif isinstance(fault, CapacityShortage):
            types = [f.instance_type for f in settings.regions[region_of(fault.region)].fleets]
            if fault.instance_type not in types:
                problems.append(
                    locate(
                        document,
                        ("faults", index, "instance_type"),
                        f"{fault.region} has no {fault.instance_type} fleet ({', '.join(types)})",
                    )
                )
        if fault.at >= scenario.minutes:
            problems.append(
                locate(
                    document,
                    ("faults", index, "at"),
                    f"after the scenario's last minute ({scenario.minutes - 1})",
                )
            )
    problems += _deploy_problems(scenario, document, settings, config)
    if problems:
        raise BadScenario("\n".join(problems))


def _deploy_problems(scenario: Scenario, document: Document, settings: Settings, config: Path) -> list[str]:
    problems = []
    cells = [cell.name for cell in settings.all_cells]
    for index, deploy in enumerate(scenario.deploys):
        if deploy.at >= scenario.minutes:
            problems.append(
                locate(
                    document,
                    ("deploys", index, "at"),
                    f"after the scenario's last minute ({scenario.minutes - 1})",
                )
            )
        if deploy.cell is not None and deploy.cell not in cells:
            problems.append(
                locate(document, ("deploys", index, "cell"), f"not a cell of {config} ({', '.join(cells)})")
            )
        if deploy.change == "new_cell" and index != 0:
            problems.append(
                locate(
                    document, ("deploys", index, "change"), "a new cell is created by the day's first deploy"
                )
            )
        if scenario.day_zero and deploy.change == "new_cell":
            problems.append(
                locate(
                    document,
                    ("deploys", index, "change"),
                    "day zero creates every cell of the config at minute 0; a new_cell is for a later day",
                )
            )
    if scenario.day_zero:
        problems.append(
            locate(
                document,
                ("day_zero",),
                "a day from an empty account is not run by the game day yet (docs/gameday.md, 'Deploy days')",
            )
        )
    return problems


def run_scenario(
    path: Path,
    json_out: IO[str] | None = None,
    png: Path | None = None,
    cells: bool = False,
    profile: str = "nominal",
    counterfactual: bool = False,
    orchestrator_on: bool = True,
    deployment_hook=None,
    deploy_args: tuple[str, ...] = (),
) -> Result:
    """`counterfactual`: run the day again with the orchestrator off (also when the scenario asks for it)
    and judge the first against the second; `orchestrator_on=False`: run only the day without it.
    `deployment_hook`: a function given the deployment read from the templates and returning the one to
    run (the mutation tests break the system through it). `deploy_args`: more arguments for every deploy's
    `python -m ops.deploy_waves` (the mutation tests': `--all-at-once`)."""
    if profile not in PROFILE_ENDS:
        raise BadScenario(f"profile {profile!r}: one of {', '.join(PROFILE_ENDS)}")
    try:
        scenario, document, config = load_scenario(path)
        settings = load_settings(config)
    except ConfigError as error:
        raise BadScenario(str(error)) from None
    check_against_config(scenario, document, settings, config)
    try:
        assembly = synthesize(config)
        deployment = read_deployment(assembly)
    except TemplateError as error:
        raise BadScenario(str(error)) from None
    if deployment_hook is not None:
        deployment = deployment_hook(deployment)
    twin = Twin(scenario, settings, deployment, orchestrator_on, profile)
    day = DeployDay(twin, settings, config, assembly, deploy_args) if scenario.deploys else None

    def emit(minute: Minute) -> None:
        if json_out is not None:
            json_out.write(json_line(minute, cells) + "\n")
            json_out.flush()

    minutes = twin.run(emit)
    orchestrator = parse_config(deployment.orchestrator_config)
    slo_ms = scenario.slo.ttft_p99_ms or settings.observability.ttft_p99_threshold_ms
    slo_errors = (
        scenario.slo.error_share if scenario.slo.error_share is not None else orchestrator.policy.error_share
    )
    rules = Rules(
        slo_ms,
        slo_errors,
        orchestrator.policy.max_step,
        orchestrator.policy.floor,
        {r.name: r.initial_weight for r in orchestrator.regions},
        policy_params(settings),
    )
    records = tuple(day.records) if day is not None else ()
    summary = judge(with_revision_faults(scenario, minutes) if records else scenario, minutes, rules)
    summary = with_deploy_violations(summary, deploy_violations(records, minutes))
    without = None
    if orchestrator_on and (counterfactual or scenario.counterfactual is not None):
        off = Twin(scenario, settings, deployment, False, profile).run()
        without = judge(scenario, off, rules)
        summary = compare(scenario, summary, without)
    if json_out is not None:
        public = summary.public()
        public["summary"]["profile"] = profile  # which end of the profiles' range the curves ran at
        public["summary"]["orchestrator"] = "on" if orchestrator_on else "off"
        if records:
            public["summary"]["deploys"] = [
                {
                    "at": r.deploy.at,
                    "change": r.deploy.change,
                    "revision": r.deploy.revision.name,
                    "ended": r.ended,
                    "exit": r.status,
                    "stacks": [s.stack for s in r.stacks],
                    "cpu_seconds": round(r.cpu_seconds, 1),
                }
                for r in records
            ]
        json_out.write(json.dumps(public, separators=(",", ":")) + "\n")
    if png is not None:
        who = "" if orchestrator_on else ", orchestrator off"
        plot(scenario, minutes, slo_ms, png, f"{path.name} ({profile} profile{who}): {summary.verdict}")
    return Result(scenario, minutes, summary, profile, without, rules, records)
