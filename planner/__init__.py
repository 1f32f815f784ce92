"""Capacity planner: forecast -> simulate -> plan -> overlay.

forecast.py reads the traffic a peak brings, inputs.py checks it against the config, the performance
profiles and the prices, simulate.py serves it in a discrete-event model of a region, plan.py searches
the smallest fleet meeting the SLO, overlay.py writes the `events:` overlay the stacks deploy."""
