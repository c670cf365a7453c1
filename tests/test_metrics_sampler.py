"""The /metrics sampler (stages/run/metrics_sampler.py): against a small local server whose
/metrics text changes with every scrape (the families kept, the rest dropped, the `@` lines in
order and about an interval apart, an error line and an early stop when the server goes away, the
trailing lines), and through `campaign run` on a stand-in engine that pauses generating while
its requests run: the point's series shows them running and the generation counter flat."""
from __future__ import annotations

import copy
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from stages.core.config import CampaignError
from stages.run import metrics_sampler as ms
from helpers.standin_helpers import SHIPPED, launch_facts, project_copy, sh_all, standin_profile

ROOT = Path(__file__).resolve().parent.parent


# ---------------------------------------------------------------- reading a series file

def read_series(path: Path) -> dict:
    """A series file as header, samples [(t, error, lines)] and trailer, checking its shape."""
    header, trailer, samples = {}, {}, []
    for line in path.read_text().splitlines():
        if line.startswith("# "):
            key, _, value = line[2:].partition("=")
            (trailer if samples or header.get("clock") and key in TRAILER else header)[key] = value
        elif line.startswith("@ "):
            assert not trailer, f"a sample after the trailing lines: {line}"
            stamp, _, rest = line[2:].partition(" ")
            error = rest[len("error="):] if rest.startswith("error=") else None
            assert rest == "" or error is not None, line
            samples.append((float(stamp), error, []))
        else:
            assert samples and samples[-1][1] is None, f"a line outside a good sample: {line}"
            samples[-1][2].append(line)
    return {"header": header, "samples": samples, "trailer": trailer}


TRAILER = ("requests_start", "requests_end", "samples", "sampler_exit")


def value(lines: list[str], name: str) -> float:
    [v] = [float(line.rsplit(" ", 1)[1]) for line in lines if line.split("{")[0] == name]
    return v


# ---------------------------------------------------------------- a local /metrics server

class Exposition:
    """Changing /metrics text: a counter that grows by 5 a scrape, a gauge, a histogram, with
    HELP and TYPE lines and families the sampler must drop."""

    def __init__(self):
        self.scrapes = 0

    def text(self) -> str:
        self.scrapes += 1
        n = self.scrapes
        label = '{engine="0",model_name="m"}'
        return "\n".join([
            "# HELP vllm:num_requests_running Number of requests in model execution batches.",
            "# TYPE vllm:num_requests_running gauge",
            f"vllm:num_requests_running{label} {float(n % 3)}",
            "# TYPE vllm:generation_tokens counter",
            f"vllm:generation_tokens_total{label} {5.0 * n}",
            f"vllm:generation_tokens_created{label} 1764690000.0",
            "# TYPE vllm:prompt_tokens histogram",
            f'vllm:prompt_tokens_bucket{{engine="0",le="1.0"}} {float(n)}',
            f'vllm:prompt_tokens_sum{{engine="0"}} {float(n)}',
            f'vllm:prompt_tokens_count{{engine="0"}} {float(n)}',
            f"sglang:token_usage{{tp_rank=\"0\"}} 0.{n}",
            "sglang:num_queue_reqs 2.0",
            # dropped: other families, and names that only begin like a kept one
            f"vllm:request_success_total{label} {float(n)}",
            f"vllm:num_requests_running_max{label} 9.0",
            f"vllm:generation_tokens_per_second{label} 1.0",
            "process_cpu_seconds_total 12.5",
            "python_gc_objects_collected_total{generation=\"0\"} 3.0",
            "",
        ])


KEPT = {"vllm:num_requests_running", "vllm:generation_tokens_total", "vllm:generation_tokens_created",
        "vllm:prompt_tokens_bucket", "vllm:prompt_tokens_sum", "vllm:prompt_tokens_count",
        "sglang:token_usage", "sglang:num_queue_reqs"}


@pytest.fixture
def server():
    expo = Exposition()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            data = expo.text().encode() if self.path == "/metrics" else b""
            self.send_response(200 if self.path == "/metrics" else 404)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    httpd.base_url = f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.expo = expo
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def test_the_lines_kept_are_the_named_families_and_their_suffixes():
    lines = Exposition().text().splitlines()
    assert {line.split("{")[0].split(" ")[0] for line in ms.select("\n".join(lines))} == KEPT
    assert not ms.kept("# TYPE vllm:num_requests_running gauge")
    assert ms.kept("vllm:num_preemptions_total 0.0") and ms.kept("vllm:gpu_cache_usage_perc 0.5")
    assert not ms.kept("vllm:num_preemptions_totally 0.0")
    assert ms.select("sglang:gen_throughput 1.0\r\n\r\n") == ["sglang:gen_throughput 1.0"]


def test_the_sampler_keeps_the_families_in_order_about_an_interval_apart(server, tmp_path):
    with ms.sampling(tmp_path, "long__c04", server.base_url, 100) as sampler:
        path = sampler.path
        first = read_series(path)            # written as it goes: the header and a first sample
        assert first["header"]["point"] == "long__c04" and len(first["samples"]) >= 1
        time.sleep(1.0)
        sampler.mark_requests(1764690000.5, 1764690030.25)
    assert path == tmp_path / "bench" / "long__c04.metrics-series.txt"
    got = read_series(path)
    assert got["header"] == {"point": "long__c04", "url": f"{server.base_url}/metrics",
                             "interval_ms": "100", "clock": "epoch seconds (UTC)"}
    assert path.read_text().startswith("# point=long__c04\n# url=")
    samples = got["samples"]
    times = [t for t, _, _ in samples]
    assert times == sorted(times) and len(set(times)) == len(times)
    gaps = [b - a for a, b in zip(times, times[1:])]
    assert 6 <= len(samples) <= 14                  # 1 s at 100 ms, and one after the body
    assert 0.07 <= sorted(gaps)[len(gaps) // 2] <= 0.2
    assert abs(times[0] - time.time()) < 60         # epoch seconds
    for _, error, lines in samples:
        assert error is None
        assert {line.split("{")[0].split(" ")[0] for line in lines} == KEPT
        assert not any(line.startswith("#") for line in lines)
    counts = [value(lines, "vllm:generation_tokens_total") for _, _, lines in samples]
    assert counts == sorted(counts) and counts[-1] - counts[0] == 5 * (len(samples) - 1)
    assert got["trailer"] == {"requests_start": "1764690000.500000", "requests_end": "1764690030.250000",
                              "samples": str(len(samples)), "sampler_exit": "ok"}
    assert path.read_text().endswith(f"# samples={len(samples)}\n# sampler_exit=ok\n")


def test_a_server_that_goes_away_is_an_error_line_and_the_point_goes_on(server, tmp_path):
    with ms.sampling(tmp_path, "p", server.base_url, 100) as sampler:
        time.sleep(0.35)
        server.shutdown()
        server.server_close()
        time.sleep(1.0)                             # the body goes on; the sampler gives up
        stopped = time.monotonic()
    assert time.monotonic() - stopped < 1.0         # a stopped sampler does not hold the point
    got = read_series(sampler.path)
    errors = [(t, e) for t, e, _ in got["samples"] if e is not None]
    good = [t for t, e, _ in got["samples"] if e is None]
    assert len(good) >= 2 and len(errors) == ms.MAX_FAILURES
    assert max(good) < min(t for t, _ in errors)
    # the open connection may be reset first; then the server refuses new ones
    assert all(e.split(":")[0] in ("ConnectError", "ReadError", "RemoteProtocolError") for _, e in errors)
    assert errors[-1][1].startswith("ConnectError: ") and "\n" not in errors[-1][1]
    assert all(lines == [] for _, e, lines in got["samples"] if e is not None)
    assert got["trailer"] == {"samples": str(len(got["samples"])), "sampler_exit": errors[-1][1]}
    assert got["trailer"]["sampler_exit"] != "ok"


def test_an_engine_that_never_answered_leaves_errors_and_a_file_of_a_point_is_never_rewritten(tmp_path):
    with ms.sampling(tmp_path, "p", "http://127.0.0.1:9", 50):
        time.sleep(0.3)
    path = ms.file_for(tmp_path, "p")
    got = read_series(path)
    assert [e is not None for _, e, _ in got["samples"]] == [True] * ms.MAX_FAILURES
    before = path.read_bytes()
    with ms.sampling(tmp_path, "p", "http://127.0.0.1:9", 50) as sampler:   # same point again
        sampler.mark_requests(1.0, 2.0)
    assert path.read_bytes() == before


def test_settings_default_disable_and_refuse():
    assert ms.settings({}) == ms.DEFAULT_INTERVAL_MS == 1000
    assert ms.settings({"metrics_sampler": None}) is None
    assert ms.settings({"metrics_sampler": {"interval_ms": 250}}) == 250
    assert ms.settings({"metrics_sampler": {}}) == 1000
    for bad in ({"interval_ms": 0}, {"interval_ms": "1s"}, {"interval_ms": True}, 1000):
        with pytest.raises(CampaignError, match="metrics_sampler"):
            ms.settings({"metrics_sampler": bad})
    shipped = yaml.safe_load((ROOT / "params.yaml").read_text())
    for name, prof in shipped["profiles"].items():
        assert prof["metrics_sampler"] == {"interval_ms": 1000}, name
    with ms.sampling(Path("/nonexistent"), "p", "http://127.0.0.1:9", None) as sampler:
        assert sampler is None


# ---------------------------------------------------------------- through `campaign run`

PORT = 8057
PAUSE_S = 3.0


def pause_params() -> dict:
    """A stand-in spec whose engine pauses generating for PAUSE_S seconds once a benchmark's first
    request arrives, sampled every 200 ms; one point and a small agents workload."""
    params = copy.deepcopy(SHIPPED)
    params["profile"] = "standin-pause"
    params["profiles"]["standin-pause"] = {**standin_profile(PORT), "metrics_sampler": {"interval_ms": 200}}
    params["workloads"]["standin-pause"] = {
        "tiny": {"description": "one short point", "prompt_tokens": 64, "output_tokens": 8,
                 "concurrency": [2], "prompts_per_user": 1},
        "team": {"kind": "agents", "description": "two short sessions", "sessions": 2,
                 "shared_history_tokens": 64, "turn_tokens": 16, "turns": 2, "output_tokens": 4}}
    params["specs"] |= {"pauser": {
        "profile": "standin-pause", "model": "tiny-llama", "layout": "pauser", "gpus": 1, "est_minutes": 1,
        "workloads": ["tiny", "team"], "args": {"--max-model-len": 4096},
        "env": {"STANDIN_PAUSE_S": str(PAUSE_S)}}}
    params["run_specs"] = ["pauser"]
    return params


@pytest.fixture(scope="module")
def paused_run(tmp_path_factory) -> Path:
    root = project_copy(tmp_path_factory.mktemp("pause"), pause_params())
    sh_all(root, ["campaign", "model", "tiny-llama"], ["campaign", "run", "pauser"], log=root / "docker.log")
    [folder] = (root / "data" / "runs").iterdir()
    return folder


def test_a_paused_engine_shows_requests_running_and_a_flat_generation_counter(paused_run):
    launch = launch_facts(paused_run)
    assert (launch["run_status"], launch["points"]) == ("complete", "2")
    assert "pausing generation" in (paused_run / "server.log").read_text()
    got = read_series(paused_run / "bench" / "tiny__c02.metrics-series.txt")
    assert got["header"]["point"] == "tiny__c02" and got["header"]["interval_ms"] == "200"
    samples = [(t, value(lines, "vllm:num_requests_running"), value(lines, "vllm:generation_tokens_total"))
               for t, error, lines in got["samples"] if error is None]
    assert len(samples) == len(got["samples"]) == int(got["trailer"]["samples"])
    assert got["trailer"]["sampler_exit"] == "ok"
    # the longest stretch of samples with requests running and not one token generated
    best, start = 0.0, None
    for i, (t, running, generated) in enumerate(samples):
        if running > 0 and start is not None and samples[start][2] == generated and samples[start][1] > 0:
            best = max(best, t - samples[start][0])
        else:
            start = i if running > 0 else None
    assert PAUSE_S - 1.0 <= best <= PAUSE_S + 0.5
    assert samples[-1][2] > samples[0][2]                   # and then the tokens came
    assert samples[-1][1] == 0                              # the last sample is after the point
    # the requests window, as the client timed it, lies within the samples
    sent, ended = float(got["trailer"]["requests_start"]), float(got["trailer"]["requests_end"])
    assert samples[0][0] < sent <= ended < samples[-1][0]
    # and the whole agents workload has its series too
    team = read_series(paused_run / "bench" / "team.metrics-series.txt")
    assert team["header"]["point"] == "team" and team["trailer"]["sampler_exit"] == "ok"
    assert "requests_start" in team["trailer"] and len(team["samples"]) >= 1
    meta = json.loads((paused_run / "meta.json").read_text())
    assert meta["spec_params"]["env"]["STANDIN_PAUSE_S"] == str(PAUSE_S)


def test_the_command_line_samples_around_a_command_of_ones_own(server, tmp_path):
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-m", "stages.run.metrics_sampler", "--folder", str(tmp_path),
                          "--point", "mine", "--url", server.base_url, "--interval-ms", "100", "--",
                          sys.executable, "-c", "import time; time.sleep(0.5); raise SystemExit(3)"],
                         cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 3                      # the command's own exit code
    path = tmp_path / "bench" / "mine.metrics-series.txt"
    assert out.stdout.strip() == str(path)
    got = read_series(path)
    assert got["header"]["interval_ms"] == "100" and got["trailer"]["sampler_exit"] == "ok"
    assert 3 <= len(got["samples"]) == int(got["trailer"]["samples"])
