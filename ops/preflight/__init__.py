"""`python -m ops.preflight CONFIG`: before a peak, check that the account can hold what the config asks for,
per region and event: the On-Demand vCPU quotas, the zones that offer each instance type, and the named
capacity reservations. Decisions are pure functions (checks.py) over what aws.py reads."""
