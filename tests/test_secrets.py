"""Secrets never reach cmd.sh, meta.json or server.log."""
from __future__ import annotations

import socket
import sys

from stages.run.engine import Engine
from stages.run.executors import Launch
from stages.run.stage import MANIFEST, seal
from stages.core.secrets import REDACTED, redact_argv, redact_env, redact_mapping, secret_values


def test_redact_flags_env_and_docker_env_args():
    argv = ["vllm", "serve", "m", "--api-key", "sk-live-123456", "--hf-token=hf_abcdef",
            "-e", "HF_TOKEN=hf_abcdef", "-eMY_SECRET=xyz12345", "--max-num-seqs", "4"]
    assert redact_argv(argv) == ["vllm", "serve", "m", "--api-key", REDACTED,
                                 f"--hf-token={REDACTED}", "-e", f"HF_TOKEN={REDACTED}",
                                 f"-eMY_SECRET={REDACTED}", "--max-num-seqs", "4"]
    assert redact_env({"HF_TOKEN": "hf_x", "OPENAI_API_KEY": "k", "NCCL_P2P_LEVEL": "SYS"}) == {
        "HF_TOKEN": REDACTED, "OPENAI_API_KEY": REDACTED, "NCCL_P2P_LEVEL": "SYS"}
    assert redact_mapping({"--api-key": "sk-1", "--max-num-seqs": 4}) == {
        "--api-key": REDACTED, "--max-num-seqs": 4}


def test_secret_values_come_from_flags_and_secret_named_env():
    values = secret_values(["x", "--api-key", "sk-live-123456"], {"HF_TOKEN": "hf_abcdef"},
                           inherited={"AWS_SECRET_ACCESS_KEY": "aws-secret-value", "HOME": "/root"})
    assert values == ["aws-secret-value", "sk-live-123456", "hf_abcdef"]


def test_engine_output_is_scrubbed_and_cmd_line_redacted(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    script = ("import os, sys; print('args: --api-key', sys.argv[2]); "
              "print('env', os.environ['HF_TOKEN']); sys.stdout.flush()")
    launch = Launch(argv=[sys.executable, "-c", script, "--api-key", "sk-live-123456"],
                    env={"HF_TOKEN": "hf_abcdef"}, cwd=tmp_path, port=port)
    log = tmp_path / "server.log"
    with Engine(launch, log) as eng:
        eng.proc.wait(timeout=30)
    text = log.read_text()
    assert "sk-live-123456" not in text and "hf_abcdef" not in text
    assert text.count(REDACTED) == 2
    assert "sk-live-123456" not in launch.shell() and "hf_abcdef" not in launch.shell()


def test_seal_writes_a_manifest_and_makes_files_read_only(tmp_path):
    (tmp_path / "bench").mkdir()
    (tmp_path / "server.log").write_text("a\n")
    (tmp_path / "bench" / "p.json").write_text("{}\n")
    manifest = seal(tmp_path)
    assert manifest.name == MANIFEST
    lines = manifest.read_text().splitlines()
    assert [line.split("  ")[1] for line in lines] == ["bench/p.json", "server.log"]
    assert all((tmp_path / p).stat().st_mode & 0o222 == 0
               for p in ("server.log", "bench/p.json", MANIFEST))


def test_redact_text_hides_every_secret_shape_and_keeps_ordinary_text():
    from stages.core.secrets import redact_text

    line = ("HF_TOKEN=hf_abcdefghijklmnopqrstu MY_PASSWORD='hunter 2' vllm serve m "
            "--api-key sk-live-1234567890abcdefgh --hf-overrides '{\"token\": \"tok-value-1\", \"n\": 4}' "
            "-H 'Authorization: Bearer eyJabc.def' --max-num-seqs 4")
    out = redact_text(line)
    for secret in ("hf_abcdefghijklmnopqrstu", "hunter 2", "sk-live-1234567890abcdefgh",
                   "tok-value-1", "eyJabc.def"):
        assert secret not in out
    assert out.startswith(f"HF_TOKEN={REDACTED} MY_PASSWORD={REDACTED} vllm serve m ")
    assert '"n": 4' in out and "--max-num-seqs 4" in out and "Bearer ***" in out
    # a bare token shape in running text, e.g. an error message quoting it
    assert redact_text("401: token hf_ABCDEFGHIJKLMNOPQRSTuv is invalid") == "401: token *** is invalid"
    # words that merely contain TOKEN or KEY are not secrets
    plain = "engine_kv_tokens=16384 tokenizer=data/models/tiny VLLM_CPU_KVCACHE_SPACE=1 max_tokens=64"
    assert redact_text(plain) == plain


def test_redact_argv_hides_json_flag_values():
    argv = ["vllm", "serve", "m", "--hf-overrides", '{"hf_token": "abcd1234", "rope": 2}']
    assert redact_argv(argv)[-1] == '{"hf_token": "***", "rope": 2}'
    assert redact_mapping({"--hf-overrides": '{"api_key": "k-123456"}'}) == {
        "--hf-overrides": '{"api_key": "***"}'}


def test_names_about_a_secret_and_empty_values_are_kept():
    from stages.core.secrets import redact_text

    line = ("Namespace(api_key=None, allow_credentials=False, mask_token_id=12, HF_TOKEN_PATH=/x, "
            "hf_token='abcd1234')")
    assert redact_text(line) == ("Namespace(api_key=None, allow_credentials=False, mask_token_id=12, "
                                 "HF_TOKEN_PATH=/x, hf_token=***)")


def test_an_excerpt_of_a_long_line_is_redacted_and_cut_whatever_its_secrets_size():
    from stages.render.evidence import EXCERPT_MAX, excerpt

    token = "hf_" + "a" * 40
    line = '{"api_key": "' + token + '", "ttfts": [' + ", ".join(["0.25"] * 2000) + "]}"
    shown = excerpt(line)
    assert token not in shown and shown.startswith('{"api_key": "***"')
    # cut at EXCERPT_MAX, saying how many characters of the (redacted) line it left out
    left_out = len(line) - (len(token) - len("***")) - EXCERPT_MAX
    assert shown == shown[:EXCERPT_MAX] + f" … ({left_out:,} more characters not shown)"
    # a secret so long that redacting it pulls text from far along the line into view
    huge = "hf_" + "b" * 5000
    line = '{"hf_token": "' + huge + '", "x": "sk-' + "c" * 30 + '"}'
    shown = excerpt(line)
    assert "b" * 20 not in shown and "c" * 20 not in shown


def test_a_text_without_the_words_a_secret_needs_is_never_changed_by_redaction():
    from stages.core.secrets import MAYBE_WORDS, may_hold_secret, redact_text

    secrets = ["HF_TOKEN=hf_abcdefghijklmnopqrstu", "--api-key sk-live-1234567890abcdefgh",
               "Authorization: Bearer eyJabc.def", "ghp_" + "a" * 24, "xoxb-" + "1" * 12,
               "AKIA" + "A" * 16, "MY_PASSWORD='hunter 2'", "github_pat_" + "b" * 22]
    for text in secrets:
        assert may_hold_secret(text) and may_hold_secret(text.upper()) and redact_text(text) != text
    for text in ("glm53__tp8__1024k__vllm__1121-062500", "decode-256k", "1.25e-05", "", "vllm/vllm-openai:v0.31.0"):
        assert not may_hold_secret(text) and redact_text(text) == text
    assert all(may_hold_secret(f"x{word.upper()}y") for word in MAYBE_WORDS)
