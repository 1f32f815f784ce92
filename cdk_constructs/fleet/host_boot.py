"""What a host runs at boot: the data disk for weights and compiled artifacts, and the ECS agent settings.
Plain strings, so tests read them without synthesizing."""

from __future__ import annotations

from settings.instances import InstanceFacts

# ECS waits at most this long between SIGTERM and SIGKILL; in-flight streams finish earlier, during the
# target groups' deregistration delay, which ECS waits out before it stops the task.
STOP_TIMEOUT_SECONDS = 120
HOST_DATA_DIR = "/opt/serving-data"
# The serving container's user (container/Dockerfile): it owns the data disk it downloads into, nothing else.
SERVING_USER_ID = 10001
# NVMe model strings the kernel reports for the two kinds of data disk.
INSTANCE_STORE_MODEL = "Amazon EC2 NVMe Instance Storage"
EBS_MODEL = "Amazon Elastic Block Store"
DATA_VOLUME_DEVICE = "/dev/xvdb"

# Installed by user data, run by systemd at every boot: cloud-init runs user data at the first boot only,
# and a warm-pool host boots again when it leaves the pool.
DATA_DISK_SCRIPT = "/usr/local/sbin/serving-data-disk"
DATA_DISK_UNIT = "serving-data-disk.service"
DATA_DISK_WAIT_SECONDS = 60  # NVMe disks can appear a moment after systemd starts the unit

# ECS agent settings: keep the multi-GiB image cached, block task access to instance metadata (tasks use
# their own role), allow the full stop timeout.
ECS_AGENT_CONFIG = (
    "ECS_IMAGE_PULL_BEHAVIOR=prefer-cached",
    "ECS_AWSVPC_BLOCK_IMDS=true",
    f"ECS_CONTAINER_STOP_TIMEOUT={STOP_TIMEOUT_SECONDS}s",
    "ECS_ENABLE_CONTAINER_METADATA=true",
)
# A host launched into a warm pool must not register with the cluster (and take tasks) before it is stopped.
ECS_WARM_POOL_CONFIG = "ECS_WARM_POOLS_CHECK=true"
# Auto Scaling stops a host entering a warm pool as soon as it has launched, without waiting for user data,
# and cloud-init runs user data once per instance: with a warm pool, user data runs at every boot instead,
# so a bootstrap cut short by the stop finishes when the host leaves the pool (EC2 Auto Scaling user guide,
# warm pool prerequisites). Every step in it is idempotent for that reason.
USER_DATA_EVERY_BOOT = "#cloud-config\ncloud_final_modules:\n- [scripts-user, always]\n"


def data_disk_script(instance: InstanceFacts) -> str:
    """Finds the data disk where weights and compiled artifacts live (the first instance-store NVMe disk where
    the type has one, else the EBS data volume) by its model string, formats it only when it holds no
    filesystem, and mounts it. Safe to run at every boot: an EBS volume keeps its filesystem and files across
    a stop, an instance store comes back blank and is formatted again (its artifacts are downloaded again).
    No fstab entry: NVMe device names may change across a stop and start, the model string does not."""
    model = INSTANCE_STORE_MODEL if instance.has_instance_store else EBS_MODEL
    return f"""#!/bin/bash
set -euo pipefail
root_disk=$(lsblk -n -o PKNAME "$(findmnt -n -o SOURCE /)")
data_disk=""
for _ in $(seq {DATA_DISK_WAIT_SECONDS}); do
  while read -r name model; do
    [ "$name" = "$root_disk" ] && continue
    if [[ "$model" == *"{model}"* ]]; then data_disk=/dev/$name; break; fi
  done < <(lsblk -d -n -o NAME,MODEL)
  [ -n "$data_disk" ] && break
  sleep 1
done
[ -n "$data_disk" ] || {{ echo "no data disk ({model}) found" >&2; exit 1; }}
if [ -z "$(blkid -o value -s TYPE "$data_disk" || true)" ]; then
  mkfs.xfs -f "$data_disk"
fi
mkdir -p {HOST_DATA_DIR}
if ! mountpoint -q {HOST_DATA_DIR}; then
  mount -o noatime "$data_disk" {HOST_DATA_DIR}
fi
chown {SERVING_USER_ID}:{SERVING_USER_ID} {HOST_DATA_DIR}
"""


def data_disk_unit() -> str:
    """Mounts the data disk before the ECS agent starts tasks that bind it; if it fails, the agent does not
    start, so no task writes gigabytes of weights to the root volume."""
    return f"""[Unit]
Description=Format (when blank) and mount the serving data disk
Before=ecs.service
[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart={DATA_DISK_SCRIPT}
[Install]
WantedBy=multi-user.target
RequiredBy=ecs.service
"""


def data_disk_commands(instance: InstanceFacts) -> list[str]:
    """User data: install the data disk script and its unit, and run it now (first boot)."""
    return [
        "set -euo pipefail",
        f"cat > {DATA_DISK_SCRIPT} <<'SERVING_DATA_DISK'",
        *data_disk_script(instance).splitlines(),
        "SERVING_DATA_DISK",
        f"chmod 0755 {DATA_DISK_SCRIPT}",
        f"cat > /etc/systemd/system/{DATA_DISK_UNIT} <<'SERVING_DATA_DISK_UNIT'",
        *data_disk_unit().splitlines(),
        "SERVING_DATA_DISK_UNIT",
        "systemctl daemon-reload",
        f"systemctl enable --now {DATA_DISK_UNIT}",
    ]


def ecs_agent_commands(warm_pool: bool = False) -> list[str]:
    """Each setting appended once, however often user data runs."""
    lines = (*ECS_AGENT_CONFIG, ECS_WARM_POOL_CONFIG) if warm_pool else ECS_AGENT_CONFIG
    return [f"grep -qxF {line} /etc/ecs/ecs.config || echo {line} >> /etc/ecs/ecs.config" for line in lines]


def ssm_agent_commands() -> list[str]:
    """Session Manager needs SSM Agent running; the ECS AMIs are built from the minimal AL2023 AMI, so install
    it where the image lacks it (the AL2023 package repositories are in S3, reachable through the gateway
    endpoint even without NAT). A host that cannot start it still serves: sessions are a convenience."""
    return [
        "{ rpm -q amazon-ssm-agent >/dev/null || dnf install -y amazon-ssm-agent; } "
        "&& systemctl enable --now amazon-ssm-agent || echo 'SSM Agent not started' >&2",
    ]
