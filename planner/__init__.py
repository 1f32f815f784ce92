"""Capacity planner: forecast -> inputs -> simulate -> plan -> overlay.

forecast.py reads the traffic a peak brings, inputs.py checks it against the config, the performance
profiles (profiles.py, per chip: chips.py), the prefill buckets the container compiles (buckets.py) and
the prices (prices.py) and describes each region's requests (demand.py), simulate.py serves it in a
discrete-event model of a region, plan.py finds the smallest fleet meeting the SLO and its margins,
report.py prints them, overlay.py writes the `events:` overlay the stacks deploy, sweep.py plots p99
against load."""
