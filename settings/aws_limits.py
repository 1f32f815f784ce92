"""Service limits the config is validated against and the constructs size things by: one place each."""

# ECS caps a container health check's start period at 300 s and its retries at 10 at an interval of
# at most 300 s: past that no container health check can cover a cold start.
CONTAINER_START_PERIOD_MAX = 300
CONTAINER_HEALTH_RETRIES_MAX = 10
CONTAINER_HEALTH_INTERVAL_MAX = 300
COLD_START_BUDGET_MAX = (
    CONTAINER_START_PERIOD_MAX + CONTAINER_HEALTH_RETRIES_MAX * CONTAINER_HEALTH_INTERVAL_MAX
)
# An ALB deregistration delay is at most 3600 s and its idle timeout at most 4000 s.
DEREGISTRATION_DELAY_MAX = 3600
