"""Every text has its Chinese translation, taking the same fields; `--lang` and
`SHAPECHECK_LANG` choose the language of every human-readable message in every format.

The completeness tests walk every table (:data:`shapecheck.i18n.TABLES`, filled by importing
every module of the package) and the code registry: a text added in English without its
Chinese entry fails here, naming the table and the key.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
import re
import string
import subprocess
import sys
from pathlib import Path

import pytest

import shapecheck
from shapecheck.messages import codes
from shapecheck import i18n
from shapecheck.api import check_path, check_text, file_result
from shapecheck.cli import main
from shapecheck.formats import FORMATS, render
from shapecheck.report import build_report
from shapecheck.report import render as render_report

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
OTHER_LANGUAGES = [language for language in i18n.LANGUAGES if language != i18n.DEFAULT]
CJK = re.compile(r"[\u4e00-\u9fff]")


def _import_everything() -> None:
    """Import every module, so that every table is registered (optional extras may be absent)."""
    for module in pkgutil.walk_packages(shapecheck.__path__, "shapecheck."):
        if module.name in ("shapecheck.__main__", "shapecheck.pytorch.front.warm"):
            continue  # it runs the command line; it traces a module (the LSP workers' preload)
        try:
            importlib.import_module(module.name)
        except ImportError:
            continue


_import_everything()
TABLES = sorted(i18n.TABLES)
FIELDS = ("summary", "message", "what", "why", "example", "fix")


def fields(template: str) -> list[tuple[str, str, str | None]]:
    """The fields of a template with their format spec and conversion (`{min:.6g}`, `{x!r}`)."""
    return sorted((name, spec or "", conversion) for _, name, spec, conversion
                  in string.Formatter().parse(template) if name is not None)


def test_the_tables_are_found() -> None:
    names = {f"{group}.{name}" for group, name in TABLES}
    assert {"codes.NOTES", "codes.HELPS", "codes.DETAILS", "codes.EXPLAIN", "report.TEXT",
            "run.MESSAGES", "formats.WORDS", "cli.MESSAGES"} <= names


@pytest.mark.parametrize("language", OTHER_LANGUAGES)
@pytest.mark.parametrize("table", TABLES, ids=lambda t: f"{t[0]}.{t[1]}")
def test_every_text_has_its_translation_with_the_same_fields(language: str,
                                                              table: tuple[str, str]) -> None:
    english = i18n.TABLES[table]
    translated = english.translation(language)
    missing = [key for key in english.english if key not in translated]
    assert missing == [], f"add these keys to shapecheck/i18n/{language}/{table[0]}.py {table[1]}"
    stale = [key for key in translated if key not in english.english]
    assert stale == [], f"these keys of {language}/{table[0]}.py {table[1]} are no longer used"
    for key, text in english.english.items():
        assert fields(translated[key]) == fields(text), (table, key)


@pytest.mark.parametrize("language", OTHER_LANGUAGES)
@pytest.mark.parametrize("code_id", sorted(codes.REGISTRY))
def test_every_code_is_explained_in_every_language(language: str, code_id: str) -> None:
    code = codes.REGISTRY[code_id]
    module = i18n.catalogue(language, "codes")
    entry = getattr(module, "CODES", {}).get(code_id)
    assert entry is not None, f"add {code_id} to shapecheck/i18n/{language}/codes.py CODES"
    assert sorted(entry) == sorted(FIELDS), code_id
    assert fields(entry["message"]) == fields(code.message), code_id
    for field in ("summary", "what", "why", "fix"):
        assert CJK.search(entry[field]), (code_id, field, "not translated")
    # The example is the same spec: only its comments are translated.
    assert _spec_lines(entry["example"]) == _spec_lines(code.example), code_id


def test_no_translation_for_a_code_that_does_not_exist() -> None:
    for language in OTHER_LANGUAGES:
        module = i18n.catalogue(language, "codes")
        assert sorted(set(getattr(module, "CODES", {})) - set(codes.REGISTRY)) == []


def _spec_lines(example: str) -> list[str]:
    return [line for line in example.splitlines() if not line.startswith("#")
            and not line.startswith("(")]


@pytest.mark.parametrize("language", OTHER_LANGUAGES)
def test_every_example_of_the_registry_still_produces_its_code(language: str) -> None:
    with i18n.use(language):
        for code in codes.REGISTRY.values():
            spec = "\n".join(_spec_lines(code.text("example")))
            if not spec.strip() or code.id in ("SC203", "SC204", "SC207"):
                continue  # a description, or it needs command-line bindings
            found = {d.code for d in check_text(spec + "\n").diagnostics}
            assert code.id in found, (code.id, found)


# --- choosing the language --------------------------------------------------------------------


def test_english_is_the_default_and_use_restores_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(i18n.ENV, raising=False)
    assert i18n.current() == "en"
    with i18n.use("zh"):
        assert i18n.current() == "zh"
        assert codes.NOTES["declared"] != codes.NOTES.english["declared"]
    assert i18n.current() == "en"
    monkeypatch.setenv(i18n.ENV, "zh_CN.UTF-8")
    assert i18n.current() == "zh"
    with i18n.use("en"):  # the explicit choice wins over the environment
        assert i18n.current() == "en"
    monkeypatch.setenv(i18n.ENV, "klingon")
    assert i18n.current() == "en"
    with pytest.raises(ValueError):
        i18n.set_language("klingon")


def run(args: list[str]) -> int:
    with pytest.raises(SystemExit) as done:
        main(args)
    return int(done.value.code or 0)


BROKEN = str(EXAMPLES / "broken" / "missing_transpose.attn")


@pytest.mark.parametrize("fmt", FORMATS)
def test_verify_speaks_chinese_in_every_format(fmt: str, capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(i18n.ENV, raising=False)
    assert run(["verify", "--lang", "zh", "--format", fmt, BROKEN]) == 1
    out = capsys.readouterr().out
    text = json.loads(out) if fmt in ("json", "sarif") else out
    if fmt == "json":
        (diagnostic,) = text["files"][0]["diagnostics"]
        assert diagnostic["code"] == "SC301" and diagnostic["severity"] == "error"
        assert diagnostic["message"].startswith("`@` 的内维不一致: d ([N, d] 的最后一轴)")
        assert diagnostic["help"] == ["你是不是想写 `Q @ K.T`?"]
        assert text["files"][0]["shapes"]["Q"] == ["N", "d"]  # shapes and names as written
    elif fmt == "sarif":
        result = text["runs"][0]["results"][0]
        assert result["ruleId"] == "SC301" and CJK.search(result["message"]["text"])
        rule = text["runs"][0]["tool"]["driver"]["rules"][result["ruleIndex"]]
        assert rule["shortDescription"]["text"] == "`@` 的内维不一致"
        assert "### 含义" in rule["help"]["markdown"]
    else:
        assert "的内维不一致" in out and "SC301" in out
    if fmt == "text":
        assert out.rstrip().endswith("在 1 个文件中发现 1 个错误和 0 个警告。")
        assert "error[SC301]" in out and "help: 你是不是想写 `Q @ K.T`?" in out


def test_the_environment_variable_chooses_the_language(capsys: pytest.CaptureFixture[str],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(i18n.ENV, "zh")
    assert run(["explain", "SC301"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("SC301 (matmul-inner-mismatch): `@` 的内维不一致\n")
    assert "怎么改" in out and "S = Q @ K\n" in out
    assert run(["explain", "SC301", "--lang", "en"]) == 0  # the option wins
    assert "How to fix it" in capsys.readouterr().out
    assert i18n.current() == "zh"  # and chose the language of that command only


def test_an_unknown_language_variable_is_said(capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(i18n.ENV, "fr")
    assert run(["explain", "SC101"]) == 0
    captured = capsys.readouterr()
    assert "SHAPECHECK_LANG=fr" in captured.err and "What it means" in captured.out
    assert run(["--lang", "fr", "explain", "SC101"]) == 2  # a usage error, from click


def test_the_command_line_s_own_messages(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(i18n.ENV, raising=False)
    assert run(["--lang", "zh", "verify", str(tmp_path / "missing.attn")]) == 2
    assert "没有这个文件或目录" in capsys.readouterr().out  # SC007, a diagnostic of that path
    assert run(["report", BROKEN, "-o", str(tmp_path / "r.html"), "--lang", "zh"]) == 1
    out = capsys.readouterr().out
    # the problems it embeds, as verify prints them (issue 34), then where it went and the verdict
    assert "error[SC301]: `@` 的内维不一致" in out
    assert out.endswith(f"已写入 {tmp_path / 'r.html'}。\n在 1 个文件中发现 1 个错误和 0 个警告。\n")
    assert run(["verify", "--dim", "N=zero", "--lang", "zh", BROKEN]) == 2
    assert "值必须是正整数" in capsys.readouterr().err


def test_run_speaks_chinese(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(i18n.ENV, raising=False)
    spec = str(EXAMPLES / "single_head.attn")
    assert run(["run", spec, "--lang", "zh", "--dim", "N=4", "--dim", "d=2"]) == 0
    out = capsys.readouterr().out
    assert "以 N=4, d=2 运行" in out and "已检查:" in out and "每一行之和为 1" in out
    assert run(["run", spec, "--lang", "zh"]) == 1
    assert "仍有未绑定的自由维度" in capsys.readouterr().err


# --- the report in Chinese --------------------------------------------------------------------


@pytest.mark.parametrize("name", ["single_head.attn", "multi_head.attn", "broken/wrong_w_o.attn"])
def test_the_report_in_chinese(name: str) -> None:
    with i18n.use("zh"):
        report = build_report(check_path(EXAMPLES / name), f"examples/{name}")
        html = render_report(report, "html")
        markdown = render_report(report, "md")
    assert '<html lang="zh-CN">' in html and "速记卡片" in html and "30 秒自检" in html
    assert "## 速记卡片" in markdown and "## 带形状注解的源码" in markdown
    assert "Q: 查询 (query)" in html and "K: 索引 (key)" in html and "V: 内容 (value)" in html
    with i18n.use("en"):
        english = render_report(build_report(check_path(EXAMPLES / name), f"examples/{name}"), "md")
    assert not CJK.search(english)


def test_the_language_is_chosen_per_process_for_subprocesses(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "shapecheck", "verify", BROKEN], cwd=ROOT,
                         capture_output=True, text=True, env={"SHAPECHECK_LANG": "zh",
                                                              "PATH": "/usr/bin:/bin"})
    assert out.returncode == 1 and "的内维不一致" in out.stdout


def test_diagnostics_made_in_english_stay_english() -> None:
    """The language applies when a diagnostic is made: format-time changes nothing."""
    program = check_path(BROKEN)
    with i18n.use("zh"):
        text = render([file_result(program, "a.attn")], "text", color=False, fail_on="error")
    assert "inner dimensions of `@` differ" in text
