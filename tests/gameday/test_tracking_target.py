"""The services' target tracking target (stacks/props.py) against the serving curve the game day runs on.

RequestsInFlight is requests a second times each request's time in the system (Little's law), and that time
grows with load (1.9 s at a tenth of a fleet's bound, 7.5 s at it), so the tracked metric is convex in the
load. Target tracking sizes a scale-in linearly (the desired count times metric over target, Application
Auto Scaling), and removes at least one task of a fleet: from the scale-in threshold (90% of the target) a
fleet lands above its target, and a cell at its everyday maximum (10 inf2 and 5 trn1 hosts in each of
us-east-1's two cells) loses 2 of its 15 tasks at once. Where it lands must leave room below what the fleet
serves within the objective: the orchestrator reads a cell's minutes 3 minutes late and moves its twin's
weight a unit or two (5-10% of a cell's share) in the meantime."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from gameday.control import SCALE_IN_RATIO, SCALE_IN_STEP_SHARE
from gameday.loop import _region_curve
from gameday.scenario import load_scenario
from settings.loader import load_settings
from stacks.props import target_requests_in_flight

REPO = Path(__file__).resolve().parents[2]
# The room a cell needs after a scale-in step for the weight its twin's scale-in sends it before the
# orchestrator, 3 minutes late, sees it: a unit of weight is about 5% of a cell's share.
WEIGHT_UNIT_ROOM = 1.05


def test_a_cell_at_its_everyday_maximum_scales_in_to_a_load_it_serves_within_the_objective():
    settings = load_settings(REPO / "config" / "prime-day.yaml")
    scenario, _, _ = load_scenario(REPO / "scenarios" / "gameday" / "unplanned-surge.yaml")
    for region in settings.regions:
        curve, slots = _region_curve(settings, region, scenario)
        load = np.asarray(curve.utilisation)
        in_flight_share = {  # per host, of its slots, as the containers' gauge reports it
            fleet.instance_type: load
            * np.asarray(curve.admitted_share)
            * np.asarray(curve.seconds_in_system)
            * curve.per_host_rps[fleet.instance_type]
            / slots[fleet.instance_type]
            for fleet in settings.regions[region].fleets
        }
        for cell in settings.cells(region):
            hosts = {
                f.instance_type: settings.cell_bounds(cell, f)[1] for f in settings.regions[region].fleets
            }
            after = {t: n - max(1, int(n * SCALE_IN_STEP_SHARE)) for t, n in hosts.items()}
            for fleet in settings.regions[region].fleets:
                kind = fleet.instance_type
                threshold = SCALE_IN_RATIO * target_requests_in_flight(settings, fleet) / slots[kind]
                below = in_flight_share[kind] <= threshold
                scale_in_load = float(np.interp(threshold, in_flight_share[kind][below], load[below]))
                capacity = sum(n * curve.per_host_rps[t] for t, n in hosts.items())
                left = sum(n * curve.per_host_rps[t] for t, n in after.items())
                landed = scale_in_load * capacity / left
                assert landed * WEIGHT_UNIT_ROOM <= curve.servable, (
                    f"{cell.name} {kind}: scales in at {scale_in_load:.0%} of its bound and lands at "
                    f"{landed:.0%}, within {WEIGHT_UNIT_ROOM - 1:.0%} of the {curve.servable:.0%} it serves "
                    "within the objective"
                )
