"""The sidecar's edge: a stand-in neuron-monitor on PATH (the real one needs Neuron devices) prints
reports; the exporter turns each into an EMF line and stops its child when it is stopped."""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from monitoring.neuron_exporter import task_revision
from tests.container.monitoring.test_neuron_metrics import SAMPLE

REPO = Path(__file__).resolve().parents[3]

FAKE_MONITOR = """#!{python}
import json, os, sys, time
open({pid_file!r}, "w").write(str(os.getpid()))
assert sys.argv[1] == "-c" and "neuron_hw_counters" in open(sys.argv[2]).read()
report = json.dumps({report})
print(report, flush=True)
print("not json", flush=True)
print(report, flush=True)
time.sleep(600)
"""


@contextlib.contextmanager
def metadata_endpoint(status: int, body: bytes):
    """A task metadata endpoint v4 on loopback (bound to a free port as it is created, port 0)."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            answer = body if self.path.endswith("/task") else b"{}"
            self.send_response(status)
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v4/abc"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_the_task_revision_comes_from_the_task_metadata_endpoint(capsys):
    with metadata_endpoint(200, json.dumps({"Family": "serving", "Revision": "12"}).encode()) as uri:
        assert task_revision({"ECS_CONTAINER_METADATA_URI_V4": uri}) == "12"
    with metadata_endpoint(500, b"oops") as uri:
        assert task_revision({"ECS_CONTAINER_METADATA_URI_V4": uri}) is None
    assert "no task revision from the metadata endpoint" in capsys.readouterr().err
    with metadata_endpoint(200, b"not json") as uri:
        assert task_revision({"ECS_CONTAINER_METADATA_URI_V4": uri}) is None
    assert task_revision({}) is None  # outside ECS


def test_exporter_prints_emf_per_report_and_stops_neuron_monitor(tmp_path):
    with metadata_endpoint(200, json.dumps({"Revision": "9"}).encode()) as uri:
        _exporter_prints_emf_per_report_and_stops_neuron_monitor(tmp_path, uri)


def _exporter_prints_emf_per_report_and_stops_neuron_monitor(tmp_path, metadata_uri):
    pid_file = tmp_path / "monitor.pid"
    fake = tmp_path / "neuron-monitor"
    fake.write_text(
        FAKE_MONITOR.format(python=sys.executable, pid_file=str(pid_file), report=json.dumps(SAMPLE))
    )
    fake.chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": str(REPO / "container"),
        "INSTANCE_TYPE": "inf2.48xlarge",
        "AWS_EMF_NAMESPACE": "LLMServing",
        "ECS_CONTAINER_METADATA_URI_V4": metadata_uri,
    }
    exporter = subprocess.Popen(
        [sys.executable, "-m", "monitoring.neuron_exporter"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        lines = [exporter.stdout.readline() for _ in range(2)]
        exporter.send_signal(signal.SIGTERM)
        assert exporter.wait(timeout=20) == 0
    finally:
        exporter.kill()
    records = [json.loads(line) for line in lines]
    assert [r["InstanceType"] for r in records] == ["inf2.48xlarge"] * 2
    assert [r["TaskDefinitionRevision"] for r in records] == ["9"] * 2
    assert records[0]["NeuronEccCorrected"] == 1
    assert "skipped a report" in exporter.stderr.read()
    monitor_pid = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _alive(monitor_pid):
        time.sleep(0.1)
    assert not _alive(monitor_pid), "neuron-monitor outlived the exporter"


def test_exporter_without_neuron_monitor_says_so(tmp_path):
    env = {**os.environ, "PATH": str(tmp_path), "PYTHONPATH": str(REPO / "container"), "INSTANCE_TYPE": "x"}
    result = subprocess.run(
        [sys.executable, "-m", "monitoring.neuron_exporter"],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 1
    assert "neuron-monitor not found" in result.stderr


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead for our purpose: reaped by its parent's exit.
    status = Path(f"/proc/{pid}/stat")
    return status.exists() and status.read_text().split()[2] != "Z"
