"""What a host runs at boot: the data disk for weights and compiled artifacts, and the ECS agent settings.
Plain strings, so tests read them without synthesizing."""

from __future__ import annotations

from settings.instances import InstanceFacts

# ECS waits at most this long between SIGTERM and SIGKILL; in-flight streams finish earlier, during the
# target groups' deregistration delay, which ECS waits out before it stops the task.
STOP_TIMEOUT_SECONDS = 120
HOST_DATA_DIR = "/opt/serving-data"
# NVMe model strings the kernel reports for the two kinds of data disk.
INSTANCE_STORE_MODEL = "Amazon EC2 NVMe Instance Storage"
EBS_MODEL = "Amazon Elastic Block Store"
DATA_VOLUME_DEVICE = "/dev/xvdb"

# ECS agent settings: keep the multi-GiB image cached, block task access to instance metadata (tasks use
# their own role), allow the full stop timeout.
ECS_AGENT_CONFIG = (
    "ECS_IMAGE_PULL_BEHAVIOR=prefer-cached",
    "ECS_AWSVPC_BLOCK_IMDS=true",
    f"ECS_CONTAINER_STOP_TIMEOUT={STOP_TIMEOUT_SECONDS}s",
    "ECS_ENABLE_CONTAINER_METADATA=true",
)


def data_disk_commands(instance: InstanceFacts) -> list[str]:
    """User data that formats and mounts the host's data disk where weights and compiled artifacts live:
    the first instance-store NVMe disk where the type has one, else the EBS data volume."""
    model = INSTANCE_STORE_MODEL if instance.has_instance_store else EBS_MODEL
    return [
        "set -euo pipefail",
        'root_disk=$(lsblk -n -o PKNAME "$(findmnt -n -o SOURCE /)")',
        'data_disk=""',
        "for name in $(lsblk -d -n -o NAME); do",
        '  [ "$name" = "$root_disk" ] && continue',
        f'  if grep -q "{model}" "/sys/block/$name/device/model" 2>/dev/null; then',
        "    data_disk=/dev/$name; break",
        "  fi",
        "done",
        f'[ -n "$data_disk" ] || {{ echo "no data disk ({model}) found" >&2; exit 1; }}',
        'mkfs.xfs -f "$data_disk"',
        f"mkdir -p {HOST_DATA_DIR}",
        f'mount -o noatime "$data_disk" {HOST_DATA_DIR}',
    ]


def ecs_agent_commands() -> list[str]:
    return [f"echo {line} >> /etc/ecs/ecs.config" for line in ECS_AGENT_CONFIG]
