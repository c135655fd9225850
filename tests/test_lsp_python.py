"""`shapecheck lsp` on Python files (issue 35, item 1), end to end with pytest-lsp: a module
that a configuration (or the client) names is traced on open and on save, in a worker; its
diagnostics arrive at their Python lines and clear after the fix; hover on a flagged line
shows the traced shapes and the explanation; the quick fix is a verified source edit; a
newer save cancels the trace in flight; `.attn` documents are answered while a trace runs."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("pygls")
pytest.importorskip("torch")
pytest_lsp = pytest.importorskip("pytest_lsp")

from lsprotocol import types  # noqa: E402
from pytest_lsp import ClientServerConfig, LanguageClient  # noqa: E402

SERVER = [sys.executable, "-m", "shapecheck", "lsp"]

MODULE = '''\
import math

import torch
from torch import nn


class Attention(nn.Module):
    def __init__(self, d_model, n_heads):
        super().__init__()
        self.n_heads, self.head_dim = n_heads, d_model // n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=-1)
        q, k, v = (t.view(B, T, self.n_heads, self.head_dim).transpose(1, 2) for t in (q, k, v))
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        weights = scores.softmax(dim=-2)
        y = (weights @ v).transpose(1, 2).reshape(B, T, C)
        return self.out(y)
'''
SOFTMAX_LINE = 18  # 0-based: `weights = scores.softmax(dim=-2)`
FIXED = MODULE.replace("softmax(dim=-2)", "softmax(dim=-1)")
SPEC = "dim N, d\ninput Q: [N, d]\noutput S = Q @ Q\n"


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER))
async def client(lsp_client: LanguageClient, tmp_path: Path):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.shapecheck]\nmodules = ["model.py:Attention"]\n', encoding="utf-8")
    (tmp_path / "model.py").write_text(MODULE, encoding="utf-8")
    (tmp_path / "named.py").write_text(MODULE.replace("Attention", "Named"), encoding="utf-8")
    params = types.InitializeParams(
        capabilities=types.ClientCapabilities(), root_uri=tmp_path.as_uri(),
        initialization_options={"targets": ["named.py:Named"]})
    await lsp_client.initialize_session(params)
    yield
    await lsp_client.shutdown_session()


async def _published(client: LanguageClient, uri: str, timeout: float = 120) -> list:
    """The next diagnostics published for ``uri`` (a trace takes one export of the module)."""
    while True:
        params = await asyncio.wait_for(
            client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS), timeout)
        if params.uri == uri:
            return list(params.diagnostics)


def _open(client: LanguageClient, uri: str, text: str, language: str = "python") -> None:
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        types.TextDocumentItem(uri=uri, language_id=language, version=1, text=text)))


def _save(client: LanguageClient, path: Path, text: str, version: int) -> None:
    """What an editor does on save: the new text in a change, the file written, didSave."""
    uri = path.as_uri()
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        types.VersionedTextDocumentIdentifier(uri=uri, version=version),
        [types.TextDocumentContentChangeWholeDocument(text=text)]))
    path.write_text(text, encoding="utf-8")
    client.text_document_did_save(types.DidSaveTextDocumentParams(
        types.TextDocumentIdentifier(uri)))


@pytest.mark.slow  # seconds each; a lighter test of the same module stays in the fast tier
@pytest.mark.asyncio(loop_scope="function")
async def test_a_saved_module_is_traced_and_reported_at_its_line_then_cleared(
        client: LanguageClient, tmp_path: Path):
    path = tmp_path / "model.py"
    uri = path.as_uri()
    _open(client, uri, MODULE)
    [softmax] = await _published(client, uri)
    assert softmax.code == "SC402" and softmax.source == "shapecheck"
    assert softmax.severity == types.DiagnosticSeverity.Warning
    assert softmax.range.start == types.Position(SOFTMAX_LINE, 25)
    assert "help: normalise over the keys: `softmax(scores, dim=-1)`" in softmax.message

    # Hover on the flagged line: what the trace computed there, and why it is wrong.
    hover = await client.text_document_hover_async(types.HoverParams(
        types.TextDocumentIdentifier(uri), types.Position(SOFTMAX_LINE, 10)))
    assert hover is not None
    text = hover.contents.value
    assert "- `weights`: `[B, n_heads, T, T]`" in text
    assert "**warning[SC402]**" in text
    assert "A softmax makes its weights sum to 1 along one axis" in text
    clean = await client.text_document_hover_async(types.HoverParams(
        types.TextDocumentIdentifier(uri), types.Position(SOFTMAX_LINE - 1, 10)))
    assert clean is not None and "- `scores`: `[B, n_heads, T, T]`" in clean.contents.value
    assert "SC402" not in clean.contents.value

    # The quick fix: `dim=-2` -> `dim=-1`, offered once a trace of the edited copy confirmed it.
    action = await _quick_fix(client, uri, softmax)
    assert action.title.startswith("normalise over the keys")
    [edit] = action.edit.changes[uri]
    assert edit.new_text == "-1"
    assert edit.range == types.Range(types.Position(SOFTMAX_LINE, 37),
                                     types.Position(SOFTMAX_LINE, 39))

    # Typing does not trace; saving the fix does, and the diagnostic clears.
    _save(client, path, FIXED, 2)
    assert await _published(client, uri) == []


async def _quick_fix(client: LanguageClient, uri: str, diagnostic: types.Diagnostic,
                     timeout: float = 120) -> types.CodeAction:
    """The one quick fix for the diagnostic, once its re-trace has confirmed it (they follow
    the diagnostics)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        actions = await client.text_document_code_action_async(types.CodeActionParams(
            types.TextDocumentIdentifier(uri), diagnostic.range,
            types.CodeActionContext(diagnostics=[diagnostic])))
        if actions:
            [action] = actions
            assert action.kind == types.CodeActionKind.QuickFix
            return action
        await asyncio.sleep(0.2)
    raise AssertionError("no quick fix")


@pytest.mark.slow  # seconds each; a lighter test of the same module stays in the fast tier
@pytest.mark.asyncio(loop_scope="function")
async def test_a_target_the_client_names_is_traced(client: LanguageClient, tmp_path: Path):
    uri = (tmp_path / "named.py").as_uri()
    _open(client, uri, MODULE.replace("Attention", "Named"))
    [softmax] = await _published(client, uri)
    assert softmax.code == "SC402" and softmax.range.start.line == SOFTMAX_LINE


@pytest.mark.slow  # seconds each; a lighter test of the same module stays in the fast tier
@pytest.mark.asyncio(loop_scope="function")
async def test_targets_from_the_clients_settings_trace_the_open_files(
        client: LanguageClient, tmp_path: Path):
    path = tmp_path / "later.py"
    text = MODULE.replace("Attention", "Later")
    path.write_text(text, encoding="utf-8")
    _open(client, path.as_uri(), text)
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"shapecheck": {"targets": ["later.py:Later"]}}))
    [softmax] = await _published(client, path.as_uri())
    assert softmax.code == "SC402" and softmax.range.start.line == SOFTMAX_LINE


@pytest.mark.asyncio(loop_scope="function")
async def test_a_file_without_a_target_is_left_alone(client: LanguageClient, tmp_path: Path):
    other = tmp_path / "other.py"
    other.write_text("x = 1\n", encoding="utf-8")
    _open(client, other.as_uri(), "x = 1\n")
    # No diagnostics for it: the next ones published are the spec's.
    spec = (tmp_path / "a.attn").as_uri()
    _open(client, spec, SPEC, "attn")
    params = await asyncio.wait_for(
        client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS), 30)
    assert params.uri == spec


@pytest.mark.slow  # seconds each; a lighter test of the same module stays in the fast tier
@pytest.mark.asyncio(loop_scope="function")
async def test_a_newer_save_cancels_the_trace_in_flight_and_specs_answer_meanwhile(
        client: LanguageClient, tmp_path: Path):
    path = tmp_path / "model.py"
    uri = path.as_uri()
    _open(client, uri, MODULE)
    # Saved again at once: the first trace is cancelled, only the fixed text's is published.
    _save(client, path, FIXED, 2)
    # While the trace runs (torch.export: seconds), a spec is checked: its diagnostics come
    # first (benchmarks/bench_lsp_python.py measures the latency side by side).
    spec = (tmp_path / "a.attn").as_uri()
    _open(client, spec, SPEC, "attn")
    while True:
        params = await asyncio.wait_for(
            client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS), 120)
        if params.uri == spec:
            assert [d.code for d in params.diagnostics] == ["SC301"]
            break
        assert False, f"a trace was published before the spec's diagnostics: {params}"
    assert await _published(client, uri) == []
    # Nothing else was published for the module: the cancelled trace never reported.
    with pytest.raises(asyncio.TimeoutError):
        await _published(client, uri, timeout=3)


@pytest.mark.slow  # seconds each; a lighter test of the same module stays in the fast tier
@pytest.mark.asyncio(loop_scope="function")
async def test_an_untraceable_product_gets_the_transpose_once_it_traces(
        client: LanguageClient, tmp_path: Path):
    """`q @ k` cannot be traced (SC601 at its line); `k.transpose(-2, -1)` is offered because
    the edited copy traces clean."""
    path = tmp_path / "model.py"
    text = MODULE.replace("q @ k.transpose(-2, -1) /", "q @ k /").replace(
        "softmax(dim=-2)", "softmax(dim=-1)")
    path.write_text(text, encoding="utf-8")
    _open(client, path.as_uri(), text)
    [untraceable] = await _published(client, path.as_uri())
    assert untraceable.code == "SC601" and untraceable.range.start.line == SOFTMAX_LINE - 1
    action = await _quick_fix(client, path.as_uri(), untraceable)
    assert action.title == "did you mean `q @ k.transpose(-2, -1)`?"
    [edit] = action.edit.changes[path.as_uri()]
    column = text.splitlines()[SOFTMAX_LINE - 1].index("q @ k") + len("q @ k")
    assert edit.new_text == ".transpose(-2, -1)"
    assert edit.range.start == edit.range.end == types.Position(SOFTMAX_LINE - 1, column)


@pytest.mark.parametrize("line, fixed", [
    ("        weights = scores.softmax(dim=-2)", "        weights = scores.softmax(dim=-1)"),
    ("        weights = F.softmax(scores, dim = 1)", "        weights = F.softmax(scores, dim = -1)"),
    ("        y = weights.transpose(-2, -1) @ v", "        y = weights @ v"),
    ("        weights = scores.softmax(dim=-1)", None),  # nothing to change: no candidate
    ("        w = scores.softmax(dim=-2) + prior.softmax(dim=-2)", None),  # which one: stay silent
])
def test_the_candidate_edits_of_a_softmax_over_the_queries(line: str, fixed: str | None) -> None:
    from shapecheck.lsp.python import candidate
    from shapecheck.messages.diagnostics import Span
    from shapecheck.messages.fixes import apply_edits

    found = candidate(_sc402(Span(2, 9, 2, 10)), "x = 1\n" + line + "\n")
    if fixed is None:
        assert found is None
    else:
        assert apply_edits("x = 1\n" + line + "\n", found.edits) == "x = 1\n" + fixed + "\n"


def _sc402(span: object) -> object:
    from dataclasses import replace

    from shapecheck.messages import codes

    # Any diagnostic carries the code; SC402's help is the PyTorch one the front end gives.
    return replace(codes.UNTRACEABLE.diag(span, target="t", reason="r"), code="SC402",
                   help=(codes.TORCH_HELPS["SC402"],))


NVIM_SCRIPT = r'''
local root = vim.env.ROOT
local client_id = vim.lsp.start_client({
  name = "shapecheck", cmd = { vim.env.PYTHON, "-m", "shapecheck", "lsp" }, root_dir = root,
})
vim.cmd("edit " .. root .. "/model.py")
local buf = vim.api.nvim_get_current_buf()
vim.lsp.buf_attach_client(buf, client_id)
local function shown()
  local out = {}
  for _, d in ipairs(vim.diagnostic.get(buf)) do
    local code = d.code or (d.user_data and d.user_data.lsp and d.user_data.lsp.code)
    table.insert(out, tostring(code) .. "@" .. d.lnum .. ":" .. d.col)
  end
  return table.concat(out, ",")
end
local lines = {}
vim.wait(120000, function() return #vim.diagnostic.get(buf) > 0 end, 100)
table.insert(lines, "opened " .. shown())
local hover = vim.lsp.buf_request_sync(buf, "textDocument/hover", {
  textDocument = { uri = vim.uri_from_bufnr(buf) }, position = { line = 18, character = 10 } },
  10000)
for _, answer in pairs(hover or {}) do
  if answer.result then
    table.insert(lines, "hover " .. answer.result.contents.value:gsub("\n", " "))
  end
end
vim.cmd([[%s/dim=-2/dim=-1/]])
vim.cmd("silent write")
local cleared = vim.wait(120000, function() return #vim.diagnostic.get(buf) == 0 end, 100)
table.insert(lines, "saved " .. tostring(cleared) .. " " .. shown())
vim.fn.writefile(lines, vim.env.OUT)
vim.cmd("qa!")
'''


@pytest.mark.slow  # seconds each; a lighter test of the same module stays in the fast tier
@pytest.mark.skipif(shutil.which("nvim") is None, reason="Neovim is not installed")
def test_neovim_sees_the_diagnostic_at_its_line_and_cleared_after_the_saved_fix(
        tmp_path: Path) -> None:
    """A real editor, headless: Neovim's own client (0.7 and later) opens the module, reads
    the diagnostic and the hover, fixes the line, writes the file."""
    (tmp_path / "pyproject.toml").write_text(
        '[tool.shapecheck]\nmodules = ["model.py:Attention"]\n', encoding="utf-8")
    (tmp_path / "model.py").write_text(MODULE, encoding="utf-8")
    (tmp_path / "check.lua").write_text(NVIM_SCRIPT, encoding="utf-8")
    out = tmp_path / "out.txt"
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "ROOT": str(tmp_path), "OUT": str(out), "PYTHON": sys.executable,
           "PYTHONPATH": os.pathsep.join([str(root), *filter(None, [os.environ.get("PYTHONPATH")])])}
    subprocess.run(["nvim", "--headless", "-u", "NONE", "-c", f"luafile {tmp_path / 'check.lua'}"],
                   cwd=tmp_path, env=env, timeout=300, check=True, capture_output=True)
    opened, hover, saved = out.read_text(encoding="utf-8").splitlines()
    assert opened == f"opened SC402@{SOFTMAX_LINE}:25"
    assert "- `weights`: `[B, n_heads, T, T]`" in hover and "**warning[SC402]**" in hover
    assert saved == "saved true "
    assert "softmax(dim=-1)" in (tmp_path / "model.py").read_text(encoding="utf-8")
