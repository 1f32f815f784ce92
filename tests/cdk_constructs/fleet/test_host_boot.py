"""The host's boot script, run for real by bash against stand-in disk tools: the data disk must be formatted
only when blank and mounted once, at every boot, so a warm-pool host that was stopped keeps its EBS files
and gets a fresh filesystem on an instance store that came back empty. (No loop device or mkfs.xfs here, so
the disk tools are small scripts that record their calls and keep the disk's state in files.)"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from cdk_constructs.fleet.host_boot import (
    DATA_DISK_SCRIPT,
    DATA_DISK_UNIT,
    EBS_MODEL,
    ECS_AGENT_CONFIG,
    ECS_WARM_POOL_CONFIG,
    HOST_DATA_DIR,
    INSTANCE_STORE_MODEL,
    SERVING_USER_ID,
    data_disk_commands,
    data_disk_script,
    data_disk_unit,
    ecs_agent_commands,
)
from settings.instances import INSTANCES

# Each tool reads and writes the fake disk's state under $STATE and logs its calls to $STATE/log.
FAKE_TOOLS = {
    "findmnt": "echo /dev/nvme0n1p1",
    "lsblk": 'if [[ "$*" == *PKNAME* ]]; then echo nvme0n1; else cat "$STATE/disks"; fi',
    "blkid": 'dev=$(basename "${@: -1}"); [ -f "$STATE/fs-$dev" ] && echo xfs || exit 2',
    "mkfs.xfs": 'echo "mkfs $*" >> "$STATE/log"; touch "$STATE/fs-$(basename "${@: -1}")"',
    "mountpoint": '[ -f "$STATE/mounted" ]',
    "mount": 'echo "mount $*" >> "$STATE/log"; touch "$STATE/mounted"',
    "mkdir": 'echo "mkdir $*" >> "$STATE/log"',
    "chown": 'echo "chown $*" >> "$STATE/log"',
    "sleep": "true",
}


class FakeHost:
    def __init__(self, root: Path, disks: str) -> None:
        self.state = root / "state"
        self.state.mkdir()
        (self.state / "disks").write_text(disks)
        (self.state / "log").write_text("")
        bin_dir = root / "bin"
        bin_dir.mkdir()
        for name, body in FAKE_TOOLS.items():
            tool = bin_dir / name
            tool.write_text(f"#!/bin/bash\n{body}\n")
            tool.chmod(0o755)
        self.path = f"{bin_dir}:/usr/bin:/bin"

    def boot(self, script: str) -> subprocess.CompletedProcess[str]:
        (self.state / "log").write_text("")
        return subprocess.run(
            ["bash", "-c", script],
            env={"PATH": self.path, "STATE": str(self.state)},
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )

    @property
    def log(self) -> list[str]:
        return (self.state / "log").read_text().splitlines()

    def stop_and_start(self, instance_store: bool) -> None:
        """Stopping unmounts everything; an instance store also loses its contents."""
        (self.state / "mounted").unlink(missing_ok=True)
        if instance_store:
            for marker in self.state.glob("fs-*"):
                marker.unlink()


INF2_DISKS = f"nvme0n1 {EBS_MODEL}\nnvme1n1 {EBS_MODEL}\n"  # the root volume is EBS too: it must be skipped
TRN1_DISKS = f"nvme0n1 {EBS_MODEL}\nnvme1n1 {INSTANCE_STORE_MODEL}\nnvme2n1 {INSTANCE_STORE_MODEL}\n"


def test_first_boot_formats_the_blank_data_volume_and_mounts_it_not_the_root_disk(tmp_path):
    host = FakeHost(tmp_path, INF2_DISKS)
    result = host.boot(data_disk_script(INSTANCES["inf2.48xlarge"]))
    assert result.returncode == 0, result.stderr
    assert host.log == [
        "mkfs -f /dev/nvme1n1",
        f"mkdir -p {HOST_DATA_DIR}",
        f"mount -o noatime /dev/nvme1n1 {HOST_DATA_DIR}",
        # Owned by the serving container's non-root user, who downloads into it.
        f"chown {SERVING_USER_ID}:{SERVING_USER_ID} {HOST_DATA_DIR}",
    ]


def test_an_ebs_volume_keeps_its_filesystem_across_a_stop(tmp_path):
    host = FakeHost(tmp_path, INF2_DISKS)
    script = data_disk_script(INSTANCES["inf2.48xlarge"])
    host.boot(script)
    host.stop_and_start(instance_store=False)
    result = host.boot(script)
    assert result.returncode == 0, result.stderr
    assert not any(line.startswith("mkfs") for line in host.log)
    assert f"mount -o noatime /dev/nvme1n1 {HOST_DATA_DIR}" in host.log


def test_an_instance_store_that_comes_back_blank_is_formatted_again(tmp_path):
    host = FakeHost(tmp_path, TRN1_DISKS)
    script = data_disk_script(INSTANCES["trn1.32xlarge"])
    host.boot(script)
    host.stop_and_start(instance_store=True)
    result = host.boot(script)
    assert result.returncode == 0, result.stderr
    assert host.log[0] == "mkfs -f /dev/nvme1n1"
    assert host.log[-2] == f"mount -o noatime /dev/nvme1n1 {HOST_DATA_DIR}"


def test_running_again_while_mounted_changes_nothing(tmp_path):
    host = FakeHost(tmp_path, INF2_DISKS)
    script = data_disk_script(INSTANCES["inf2.48xlarge"])
    host.boot(script)
    result = host.boot(script)
    assert result.returncode == 0, result.stderr
    assert host.log == [
        f"mkdir -p {HOST_DATA_DIR}",
        f"chown {SERVING_USER_ID}:{SERVING_USER_ID} {HOST_DATA_DIR}",
    ]


def test_a_missing_data_disk_fails_the_unit_with_a_message(tmp_path):
    host = FakeHost(tmp_path, f"nvme0n1 {EBS_MODEL}\n")
    result = host.boot(data_disk_script(INSTANCES["inf2.48xlarge"]))
    assert result.returncode == 1
    assert f"no data disk ({EBS_MODEL}) found" in result.stderr
    assert host.log == []


@pytest.mark.parametrize("instance_type", ["inf2.48xlarge", "trn1.32xlarge"])
def test_user_data_is_valid_bash_and_installs_the_script_verbatim(instance_type):
    instance = INSTANCES[instance_type]
    commands = data_disk_commands(instance)
    user_data = "\n".join([*commands, *ecs_agent_commands(warm_pool=True)]) + "\n"
    checked = subprocess.run(["bash", "-n"], input=user_data, capture_output=True, text=True, check=False)
    assert checked.returncode == 0, checked.stderr
    # The quoted heredoc carries the script unexpanded, byte for byte.
    start = commands.index(f"cat > {DATA_DISK_SCRIPT} <<'SERVING_DATA_DISK'") + 1
    end = commands.index("SERVING_DATA_DISK")
    assert "\n".join(commands[start:end]) + "\n" == data_disk_script(instance)
    assert commands[-1] == f"systemctl enable --now {DATA_DISK_UNIT}"


def test_the_unit_runs_before_the_ecs_agent_and_stops_it_when_the_disk_fails():
    unit = data_disk_unit()
    assert "Before=ecs.service" in unit and "RequiredBy=ecs.service" in unit
    assert f"ExecStart={DATA_DISK_SCRIPT}" in unit and "Type=oneshot" in unit


def test_agent_settings_are_written_once_however_often_user_data_runs(tmp_path):
    """With a warm pool user data runs at every boot; the agent config must not grow with each one."""
    config = tmp_path / "ecs.config"
    commands = [c.replace("/etc/ecs/ecs.config", str(config)) for c in ecs_agent_commands(warm_pool=True)]
    for _ in range(3):
        subprocess.run(["bash", "-euo", "pipefail", "-c", "\n".join(commands)], check=True)
    lines = config.read_text().splitlines()
    assert lines == [*ECS_AGENT_CONFIG, ECS_WARM_POOL_CONFIG]


def test_warm_pool_check_is_in_the_agent_config_only_with_a_warm_pool():
    assert any(ECS_WARM_POOL_CONFIG in line for line in ecs_agent_commands(warm_pool=True))
    assert not any(ECS_WARM_POOL_CONFIG in line for line in ecs_agent_commands())
