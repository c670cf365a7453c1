"""params.yaml is checked whenever a command loads it: every problem one line, exit status 2."""
from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from stages.core import config
from stages.cli import main
from stages.core.config import ParamsError, load_params
from stages.core.params_check import check_params

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = yaml.safe_load((ROOT / "params.yaml").read_text())
PREFIX = "campaign: error: params.yaml: "


def project(tmp_path: Path, edit) -> Path:
    """A project folder whose params.yaml is the shipped one changed by `edit`."""
    params = copy.deepcopy(SHIPPED)
    edit(params)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    return tmp_path


def refused(root: Path, args: list[str]) -> list[str]:
    """The problems a command printed, each checked to be one prefixed line, with exit status 2."""
    result = CliRunner().invoke(main, [*args, "--root", str(root)])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    lines = result.output.strip().splitlines()
    assert lines and all(line.startswith(PREFIX) for line in lines), lines
    return [line.removeprefix(PREFIX) for line in lines]


def test_shipped_params_pass():
    assert check_params(copy.deepcopy(SHIPPED), ROOT) == []
    assert load_params(ROOT)["profile"] == SHIPPED["profile"]


def _set(path: str, value):
    """An edit setting params[a][b][c] (path 'a.b.c'); value None deletes the key."""
    def edit(params):
        *parents, last = path.split(".")
        node = params
        for key in parents:
            node = node[key]
        if value is None:
            del node[last]
        else:
            node[last] = value
    return edit


CASES = {
    "unknown profile": (_set("profile", "gpu-cloud"),
                        "profile 'gpu-cloud' is not one of profiles (local-cpu, h200x1, h200x8)"),
    "active profile without python": (_set("profiles.local-cpu.python", None),
                                       "profiles.local-cpu.python is not set"),
    "python that is no command": (_set("profiles.h200x1.python", 3),
                                  "profiles.h200x1.python must be a command or a path, or null"),
    "model of an unknown shape": (_set("models.llama-1b.layers", None),
                                  "models.llama-1b must set layers, hidden, heads"),
    "unknown run spec": (_set("run_specs", ["tiny-seqs4", "tiny-seqs99"]),
                         "run_specs: 'tiny-seqs99' is not one of specs"),
    "spec without model": (_set("specs.tiny-seqs4.model", None), "specs.tiny-seqs4: missing model"),
    "spec without layout": (_set("specs.tiny-seqs16.layout", None), "specs.tiny-seqs16: missing layout"),
    "spec of an unknown profile": (_set("specs.qwen3-235b-tp4.profile", "h100"),
                                   "specs.qwen3-235b-tp4.profile 'h100' is not one of profiles"),
    "zero concurrency": (_set("workloads.local-cpu.chat.concurrency", [1, 0]),
                         "workloads.local-cpu.chat.concurrency: 0 is not a positive integer"),
    "negative concurrency": (_set("workloads.h200x8.short-1k.concurrency", [-8]),
                             "workloads.h200x8.short-1k.concurrency: -8 is not a positive integer"),
    "text concurrency": (_set("workloads.local-cpu.long.concurrency", ["4"]),
                         "workloads.local-cpu.long.concurrency: '4' is not a positive integer"),
    "prompt beyond the context": (_set("workloads.local-cpu.long.prompt_tokens", 4090),
                                  "specs.tiny-seqs4: workloads long needs 4,154 tokens (prompt_tokens + "
                                  "output_tokens), beyond the server's maximum context of 4,096"),
    "prompt beyond an sglang context": (_set("specs.qwen3-235b-sglang-tp4.args.--context-length", 200000),
                                        "specs.qwen3-235b-sglang-tp4: workloads doc-256k needs 256,512 "
                                        "tokens"),
    "ramp beyond the context": (_set("workloads.local-cpu.ramp.end_tokens", 4090),
                                "specs.tiny-seqs4: workloads ramp grows to about 4,122 tokens, beyond "
                                "the server's maximum context of 4,096"),
    "agents beyond the context": (_set("workloads.local-cpu.agents.turns", 8),
                                  "specs.tiny-seqs16: workloads agents grows to about 4,160 tokens"),
    "no maximum context": (_set("specs.tiny-seqs4.args.--max-model-len", None),
                           "specs.tiny-seqs4.args must set --max-model-len (or --context-length) to a "
                           "positive integer, not None"),
    "layout holding the run-id separator": (_set("specs.tiny-seqs4.layout", "cpu__seqs4"),
                                            "specs.tiny-seqs4.layout: name 'cpu__seqs4' is not safe"),
    "model with a slash": (_set("specs.tiny-seqs4.model", "../tiny"),
                           "specs.tiny-seqs4.model: name '../tiny' is not safe"),
    "site on the runs": (_set("paths.site", "data/runs"),
                         "paths.site (data/runs) overlaps paths.runs (data/runs)"),
    "docs holding the runs": (_set("paths.docs", "data"), "paths.docs (data) overlaps paths.runs (data/runs)"),
    "derived inside the nodes": (_set("paths.derived", "data/nodes/derived"),
                                 "paths.derived (data/nodes/derived) overlaps paths.nodes (data/nodes)"),
    "warehouse inside the models": (_set("paths.warehouse", "data/models/w.duckdb"),
                                    "paths.warehouse (data/models/w.duckdb) overlaps paths.models"),
    "site as the project root": (_set("paths.site", "."), "paths.site (.) is or holds the project root"),
    "publish above the project": (_set("paths.publish", ".."), "paths.publish (..) is or holds the project root"),
    "facts inside the site": (_set("paths.facts", "data/site/facts.json"),
                              "paths.site (data/site) overlaps paths.facts (data/site/facts.json)"),
    "docs on the locks": (_set("paths.docs", "data/.locks"),
                          "paths.docs (data/.locks) holds the locks folder data/.locks"),
    "ledger as the derived folder": (_set("paths.ledger", "data/derived"),
                                     "paths.derived (data/derived) overlaps paths.ledger (data/derived)"),
    "a profile's rule among the shared rules": (
        _set("rules.prefix_cache_tok_s", 60000),
        "rules.prefix_cache_tok_s is not a rule here (it belongs under profiles.<name>.rules)"),
    "a profile without one of its rules": (_set("profiles.h200x8.rules.burst_tpot_ms", None),
                                           "profiles.h200x8.rules is missing burst_tpot_ms"),
    "a rule that is not a number": (_set("rules.gate_min_score", "high"),
                                    "rules.gate_min_score must be a number, not 'high'"),
    "a gate answer budget leaving no room for a prompt": (
        _set("specs.tiny-seqs4.gate", {"answer_tokens": 4000}),
        "specs.tiny-seqs4: answer_tokens (4,000) and template_margin_tokens (16) leave no room for a "
        "gate prompt in the server's maximum context of 4,096 tokens (the prompt needs 256)"),
    "a gate timeout rate of zero": (_set("profiles.h200x8.gate.min_prefill_tok_s", 0),
                                    "profiles.h200x8.gate.min_prefill_tok_s must be a positive number, not 0"),
    "an unknown gate setting": (_set("gate.context_fraction", 0.9),
                                "gate.context_fraction is not a gate setting (depths, seed, answer_tokens"),
    "a gate without its seed": (_set("gate.seed", None), "gate is missing seed"),
    "a gate depth beyond the prompt": (_set("specs.glm53-tp8-dcp8.gate", {"depths": [0.5, 1.5]}),
                                       "specs.glm53-tp8-dcp8.gate.depths must be a list of shares between "
                                       "0 and 1, not [0.5, 1.5]"),
    "a profile without rules": (_set("profiles.local-cpu.rules", None),
                                "profiles.local-cpu.rules must be a mapping of prefix_cache_tok_s, "
                                "default_max_num_seqs, burst_tpot_ms"),
}


def test_each_profile_has_its_own_rules_over_the_shared_ones():
    params = copy.deepcopy(SHIPPED)
    params["profiles"]["h200x8"]["rules"]["default_max_num_seqs"] = 512
    settings = config.derive_settings(params)
    assert settings["profiles"]["h200x8"]["rules"] == {
        **SHIPPED["rules"], **SHIPPED["profiles"]["h200x8"]["rules"], "default_max_num_seqs": 512}
    assert settings["rules"] == settings["profiles"]["local-cpu"]["rules"]
    assert settings["rules"]["gate_min_score"] == SHIPPED["rules"]["gate_min_score"]
    assert settings["profiles"]["h200x8"]["workloads"] == SHIPPED["workloads"]["h200x8"]


@pytest.mark.parametrize("case", list(CASES))
def test_each_bad_param_is_its_own_line_and_exit_2(tmp_path, case):
    edit, line = CASES[case]
    problems = refused(project(tmp_path, edit), ["schedule", "--dry-run"])
    assert any(p.startswith(line) for p in problems), problems


@pytest.mark.parametrize("args", [["run", "tiny-seqs4", "--dry-run"], ["ingest"], ["derive"], ["render"],
                                  ["trace", "--value", "1"], ["model"]])
def test_every_command_checks_params_before_it_starts(tmp_path, args):
    root = project(tmp_path, _set("workloads.local-cpu.chat.concurrency", [0]))
    assert refused(root, args) == ["workloads.local-cpu.chat.concurrency: 0 is not a positive integer"]
    assert sorted(p.name for p in root.iterdir()) == ["params.yaml"]      # nothing was written


def test_all_problems_are_reported_at_once(tmp_path):
    def edit(params):
        params["profile"] = "nope"
        del params["specs"]["tiny-seqs4"]["model"]
        params["workloads"]["local-cpu"]["chat"]["concurrency"] = [0]
        params["paths"]["site"] = "data/runs"
    problems = refused(project(tmp_path, edit), ["derive"])
    for start in ("profile 'nope'", "specs.tiny-seqs4: missing model", "workloads.local-cpu.chat.concurrency",
                  "paths.site (data/runs)"):
        assert sum(p.startswith(start) for p in problems) == 1, (start, problems)


@pytest.mark.parametrize("name", ["../evil", "$(touch pwned)", "-rf", ".hidden", "a..b", "a b", "x;y"])
def test_unsafe_spec_names_are_refused(tmp_path, name):
    def edit(params):
        params["specs"][name] = copy.deepcopy(params["specs"]["tiny-seqs4"])
        params["run_specs"] = [name]
    root = project(tmp_path, edit)
    problems = refused(root, ["schedule", "--dry-run"])
    assert any(p.startswith(f"specs.{name}: name {name!r} is not safe as a file name") for p in problems)
    assert not (root / "pwned").exists() and not Path("pwned").exists()


def test_schedule_dry_run_quotes_the_spec_names_it_prints(tmp_path, monkeypatch):
    """Even a name the check let through is printed as one shell word."""
    name = "$(touch pwned)"
    monkeypatch.setattr(config, "check_params", lambda params, root: [])
    root = project(tmp_path, lambda p: p["specs"].__setitem__(name, copy.deepcopy(p["specs"]["tiny-seqs4"])))
    result = CliRunner().invoke(main, ["schedule", "--dry-run", name, "--root", str(root)])
    assert result.exit_code == 0, result.output
    assert "campaign run '$(touch pwned)' --port" in result.output


def test_params_error_carries_every_problem():
    params = copy.deepcopy(SHIPPED)
    params["workloads"]["local-cpu"]["chat"]["concurrency"] = [0, -1]
    problems = check_params(params, ROOT)
    assert len(problems) == 2
    error = ParamsError(problems)
    assert error.problems == problems and str(error).splitlines() == problems


def test_arm_labels_name_specs_and_phases_are_positive():
    params = copy.deepcopy(SHIPPED)
    params["arms"]["dsv4-pro-tep8"]["follow_up_of"] = "no-such-spec"
    params["arms"]["tiny-seqs4"] = {"phase": 0, "rescued_by": "tiny-seqs16"}
    params["arms"]["ghost"] = {"phase": 2}
    assert sorted(check_params(params, ROOT)) == [
        "arms.dsv4-pro-tep8.follow_up_of: 'no-such-spec' is not another spec",
        "arms.tiny-seqs4.phase must be a positive integer, not 0",
        "arms.tiny-seqs4.rescued_by is not a label (follow_up_of, superseded_by, phase)",
        "arms: 'ghost' is not one of specs",
    ]
