"""The deploy arithmetic: with one task per host and 100% minimum healthy, a deploy's batch is what the ASG
can still add above the running tasks, so hosts need headroom above the service maximum."""

from hypothesis import given
from hypothesis import strategies as st

from cdk_constructs.fleet.rollout import HostBounds, deploy_batch, surge_hosts

bounds = st.integers(0, 200).flatmap(lambda low: st.tuples(st.just(low), st.integers(max(low, 1), 400)))


@given(bounds, st.integers(1, 100), st.data())
def test_a_deploy_can_always_start_a_new_task_and_never_needs_a_host_the_asg_cannot_add(
    service_bounds, surge_percent, data
):
    low, high = service_bounds
    hosts = HostBounds.for_service(low, high, surge_percent)
    desired = data.draw(st.integers(max(low, 1), high))
    batch = deploy_batch(desired, hosts.max_hosts)
    assert 1 <= batch <= desired
    assert desired + batch <= hosts.max_hosts
    assert hosts.min_hosts == low and hosts.max_hosts > high


@given(bounds, st.integers(1, 100))
def test_at_the_maximum_the_batch_is_the_surge(service_bounds, surge_percent):
    _, high = service_bounds
    hosts = HostBounds.for_service(0, high, surge_percent)
    assert deploy_batch(high, hosts.max_hosts) == hosts.surge == surge_hosts(high, surge_percent)


def test_without_headroom_a_deploy_at_the_maximum_has_no_host():
    assert deploy_batch(20, asg_max=20) == 0  # the stall the surge removes
    assert deploy_batch(15, asg_max=20) == 5  # below the maximum, only max - running at a time


def test_default_surge_deploys_a_full_fleet_in_four_cold_starts():
    hosts = HostBounds.for_service(2, 20, 25)
    assert (hosts.surge, hosts.max_hosts) == (5, 25)
    assert hosts.deploy_rounds(20) == 4
    assert hosts.deploy_rounds(2) == 1  # at the minimum both replacements start at once
    assert surge_hosts(1, 1) == 1  # at least one host, however small the share
