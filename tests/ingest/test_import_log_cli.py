"""`kvledger import-log`: its text form states what its JSON form states, run by run; the command
leaves the cyclic collector as it found it; the CLI imports neither the planner nor pydantic to
build its parser (interpreter start is most of a small import's time)."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
from pathlib import Path

import pytest

from app.cli import main
from app.core.units import fmt_bytes

from .ingest_helpers import LOGS

LOG = LOGS / "13-v0102-qwen3-30b-a3b-fp8-2xl40s-tp2-ep.log"


def _both(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[list[str], dict]:  # type: ignore[type-arg]
    assert main(["import-log", str(path)]) == 0
    text = capsys.readouterr().out.splitlines()
    assert main(["import-log", str(path), "--json"]) == 0
    return text, json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("name", ["13-v0102-qwen3-30b-a3b-fp8-2xl40s-tp2-ep.log", "01-v064-llama31-8b-rtx3090-tp1.log",
                                  "public/21-v0102-unknown-fp8kv-tp1-two-runs-mml-fail.log"])
def test_text_form_states_the_json_form(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    text, doc = _both(LOGS / name, capsys)
    if name.startswith("public/21"):  # the text form left out run 0's 230,528 tokens and 2.31x
        assert "  engine: 230,528 tokens, max concurrency 2.31x at 100,000 tokens" in text
    headers = [i for i, line in enumerate(text) if line.startswith("run ")]
    assert len(headers) == len(doc["runs"]) >= 1
    for k, (start, run) in enumerate(zip(headers, doc["runs"], strict=True)):
        assert text[start].startswith(f"run {k}: vLLM ")
        assert text[start].endswith(f"model {run['settings'].get('model') or '?'}")
        block = text[start + 1 : headers[k + 1] if k + 1 < len(headers) else len(text)]
        rank_lines = [line for line in block if "  total " in line]
        assert len(rank_lines) == len(run["ranks"])
        for line, r in zip(rank_lines, run["ranks"], strict=True):
            assert line.split()[0] == r["rank"] and f"kv {fmt_bytes(r.get('kv_bytes'))}" in line
        engine = run["engine"]  # every figure the JSON has: public/21's run 0 prints tokens, no blocks
        said = [f"{engine['num_gpu_blocks']:,} blocks"] if engine.get("num_gpu_blocks") is not None else []
        said += [f"{engine['kv_tokens']:,} tokens"] if engine.get("kv_tokens") is not None else []
        if engine.get("max_concurrency") is not None:
            at = engine["max_concurrency_tokens"]
            said.append(f"max concurrency {engine['max_concurrency']:g}x at {at:,} tokens")
        assert [line for line in block if line.startswith("  engine: ")] == (
            [f"  engine: {', '.join(said)}"] if said else [])
        assert sum(line.startswith("  finding [") for line in block) == len(run["findings"])


@pytest.mark.parametrize("enabled", [True, False])
def test_the_collector_is_left_as_it_was(enabled: bool, capsys: pytest.CaptureFixture[str]) -> None:
    was = gc.isenabled()
    try:
        (gc.enable if enabled else gc.disable)()
        for flags in ([], ["--json"]):
            assert main(["import-log", str(LOG), *flags]) == 0
            assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()
    capsys.readouterr()


def test_the_cli_builds_its_parser_without_the_planner() -> None:
    code = ("import sys, app.cli; app.cli.build_parser(); "
            "print(sorted(m for m in ('app.core.exports', 'app.core.plan', 'pydantic') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_export_still_checks_and_shows_its_formats(capsys: pytest.CaptureFixture[str]) -> None:
    from app.core.exports import FORMATS

    with pytest.raises(SystemExit) as exc:
        main(["export", "plan.json", "--format", "nope"])
    assert exc.value.code == 2
    assert "invalid choice: 'nope'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["export", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    assert f"one of: {', '.join(FORMATS)}" in shown


@pytest.mark.parametrize("with_config", [False, True])
def test_json_form_is_services_import_log(with_config: bool, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    """The command runs import_log's two steps without importing services.imports: same output."""
    from app.ingest.catalogue import get_model
    from app.services.imports import import_log

    path = LOGS / "14-v0102-qwen3-235b-a22b-fp8-8xl40s-tp8-ep.log"
    text = path.read_bytes().decode("utf-8", errors="replace")
    config = get_model("Qwen3-235B-A22B-FP8").config_dict() if with_config else None
    flags = []
    if config is not None:
        (tmp_path / "config.json").write_text(json.dumps(config))
        flags = ["--config", str(tmp_path / "config.json")]
    assert main(["import-log", str(path), "--json", *flags]) == 0
    assert json.loads(capsys.readouterr().out) == json.loads(json.dumps(import_log(text, config)))


def test_import_log_imports_neither_pydantic_nor_the_planner() -> None:
    code = (f"import sys, app.cli; app.cli.main(['import-log', {str(LOG)!r}]); "
            "print(sorted(m for m in ('app.schemas', 'app.core.plan', 'pydantic', 'fastapi', 'sqlalchemy', 'plotly') "
            "if m in sys.modules), file=sys.stderr)")
    err = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stderr
    assert err.strip() == "[]"


def test_the_text_form_states_non_torch_and_cuda_graphs_where_the_log_does() -> None:
    # log 29 (v0.19, H100): "non-torch memory 0.25 GiB", CUDA graphs 0.91 GiB; --json had them, the text did not
    import subprocess
    import sys
    from pathlib import Path

    log = Path(__file__).resolve().parents[1] / "data" / "vllm-logs" / "29-v0190-llama31-8b-h100-tp1-mml16k.log"
    proc = subprocess.run([sys.executable, "-m", "app.cli", "import-log", str(log)], capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    row = proc.stdout.splitlines()[1]
    assert "non-torch 256.0 MiB" in row and "cuda graphs 931.8 MiB" in row
    assert row.index("activation") < row.index("non-torch") < row.index("cuda graphs") < row.index("  kv ")


@pytest.mark.parametrize(("name", "served"), [
    ("public/35-v042-opt-125m-tp1-mml-only-in-engine-config.log", "facebook/opt-125m"),
    ("public/52-v050post1-deepseek-v2-lite-tp1-weights-no-mla.log", "deepseek-ai/DeepSeek-V2-Lite"),
])
def test_the_last_key_of_a_v0_engine_config_leaves_its_closing_paren(name: str, served: str,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    # V0's "Initializing an LLM engine (v0.4.2) with config: model=..., served_model_name=facebook/opt-125m)"
    # read as 'facebook/opt-125m)' (found importing seed 003's model line)
    assert main(["import-log", str(LOGS / name), "--json"]) == 0
    runs = json.loads(capsys.readouterr().out)["runs"]
    assert [run["settings"]["served_model_name"] for run in runs] == [served] * len(runs)
