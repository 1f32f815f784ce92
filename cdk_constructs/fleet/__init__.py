"""One Neuron instance type's hosts and the serving service on them, composed from parts with one job each:
hosts (launch template, ASG, capacity provider), the task definition (with the neuron-monitor sidecar), the
Neuron health alarms, the service with its alarms and deployment rollback, and its scaling. `NeuronFleet`
in fleet.py puts them together."""

from cdk_constructs.fleet.fleet import NeuronFleet
from cdk_constructs.fleet.image import ImageSource
from cdk_constructs.fleet.props import (
    CapacityBlockProps,
    CapacityReservationProps,
    FleetProps,
    FleetTargets,
    ScheduledBounds,
    ServingPorts,
    WarmPoolProps,
)

__all__ = [
    "CapacityBlockProps",
    "CapacityReservationProps",
    "FleetProps",
    "FleetTargets",
    "ImageSource",
    "NeuronFleet",
    "ScheduledBounds",
    "ServingPorts",
    "WarmPoolProps",
]
