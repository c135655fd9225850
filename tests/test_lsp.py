"""`shapecheck lsp` end to end: pytest-lsp starts the real server over stdio and talks
to it as an editor does (open, edit, read diagnostics, hover, definition, inlay hints,
code actions, symbols, shutdown)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("pygls")
pytest_lsp = pytest.importorskip("pytest_lsp")

from lsprotocol import types  # noqa: E402
from pytest_lsp import ClientServerConfig, LanguageClient  # noqa: E402

SERVER = [sys.executable, "-m", "shapecheck", "lsp"]

SPEC = """\
dim N, d
input Q: [N, d]
input K: [N, d]
input V: [N, d]
S = Q @ K.T / sqrt(d)
P = softmax(S, axis=row)
output O = P @ V
"""
BROKEN = SPEC.replace("Q @ K.T", "Q @ K")


def _position(text: str, needle: str, offset: int = 0) -> types.Position:
    """The position (UTF-16) of the first `needle` in `text`, plus `offset` characters."""
    before = text[: text.index(needle) + offset]
    line = before.count("\n")
    column = before[before.rfind("\n") + 1:]
    return types.Position(line, len(column.encode("utf-16-le")) // 2)


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER))
async def client(lsp_client: LanguageClient, tmp_path: Path):
    (tmp_path / "pyproject.toml").write_text(
        "[tool.shapecheck]\nignore = [\"SC401\"]\n\n[tool.shapecheck.dims]\nN = 128\nd = 64\n",
        encoding="utf-8")
    params = types.InitializeParams(
        capabilities=types.ClientCapabilities(),
        root_uri=tmp_path.as_uri(),
    )
    await lsp_client.initialize_session(params)
    yield
    await lsp_client.shutdown_session()


async def _open(client: LanguageClient, uri: str, text: str, version: int = 1) -> list[types.Diagnostic]:
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        types.TextDocumentItem(uri=uri, language_id="attn", version=version, text=text)))
    await client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    return client.diagnostics[uri]


@pytest.mark.asyncio(loop_scope="function")
async def test_diagnostics_on_open_and_after_an_incremental_edit(client: LanguageClient, tmp_path):
    uri = (tmp_path / "a.attn").as_uri()
    diagnostics = await _open(client, uri, BROKEN)
    [matmul] = diagnostics
    assert matmul.code == "SC301" and matmul.source == "shapecheck"
    assert matmul.severity == types.DiagnosticSeverity.Error
    assert matmul.range == types.Range(types.Position(4, 4), types.Position(4, 9))
    assert "help: did you mean `Q @ K.T`?" in matmul.message
    assert matmul.related_information and "declared here" in matmul.related_information[0].message
    # Type `.T` after `K`: an incremental change.
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        types.VersionedTextDocumentIdentifier(uri=uri, version=2),
        [types.TextDocumentContentChangePartial(
            range=types.Range(types.Position(4, 9), types.Position(4, 9)), text=".T")]))
    await client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    assert not client.diagnostics[uri]
    # A whole-text change (the other kind of sync) that adds a line above everything.
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        types.VersionedTextDocumentIdentifier(uri=uri, version=3),
        [types.TextDocumentContentChangeWholeDocument(text="# header\n" + BROKEN)]))
    await client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    [moved] = client.diagnostics[uri]
    assert moved.code == "SC301" and moved.range.start == types.Position(5, 4)


@pytest.mark.asyncio(loop_scope="function")
async def test_configuration_and_noqa_apply(client: LanguageClient, tmp_path):
    uri = (tmp_path / "b.attn").as_uri()
    text = "dim N, d, unused\ninput Q: [N, d]\nP = softmax(Q @ Q.T / sqrt(d), axis=col)\n" \
           "output O = P @ Q  # noqa: SC402\nx = Q @ Q  # noqa: SC301\n"
    codes = sorted(d.code for d in await _open(client, uri, text))
    assert codes == ["SC301", "SC502"]  # SC401 ignored by pyproject.toml, SC402 by noqa


@pytest.mark.asyncio(loop_scope="function")
async def test_hover_shows_the_element_type(client: LanguageClient, tmp_path):
    """`int[...]` positions and `complex[...]` rotations show their element type (issue 21)."""
    text = ("dim N, h\ninput pos: int[N]\ninput x: [N, h, 2]\n"
            "z = view_as_complex(x) * polar(ones_like(pos[:, None] * 1.0), pos[:, None] * 0.5)\n")
    uri = (tmp_path / "e.attn").as_uri()
    await _open(client, uri, text)
    for anchor, shape in (("z =", "complex[N, h]"), ("pos:", "int[N]")):
        hover = await client.text_document_hover_async(types.HoverParams(
            types.TextDocumentIdentifier(uri), _position(text, anchor, 0)))
        assert hover is not None and shape in hover.contents.value, (anchor, hover)

@pytest.mark.asyncio(loop_scope="function")
async def test_hover_shows_symbolic_and_configured_shapes(client: LanguageClient, tmp_path):
    uri = (tmp_path / "c.attn").as_uri()
    await _open(client, uri, SPEC)
    hover = await client.text_document_hover_async(types.HoverParams(
        types.TextDocumentIdentifier(uri), _position(SPEC, "S = Q", 0)))
    assert hover is not None
    assert "`S`" in hover.contents.value and "[N, N]" in hover.contents.value
    assert "[128, 128]" in hover.contents.value and "N=128" in hover.contents.value
    dim = await client.text_document_hover_async(types.HoverParams(
        types.TextDocumentIdentifier(uri), _position(SPEC, "sqrt(d)", 5)))
    assert dim is not None and "d = 64" in dim.contents.value
    nothing = await client.text_document_hover_async(types.HoverParams(
        types.TextDocumentIdentifier(uri), _position(SPEC, "softmax", 2)))
    assert nothing is None  # a builtin, not a tensor or a dim


@pytest.mark.asyncio(loop_scope="function")
async def test_positions_are_utf16_code_units(client: LanguageClient, tmp_path):
    uri = (tmp_path / "d.attn").as_uri()
    text = "dim N, d\ninput Q: [N, d]  # 😀 注意\nα𝑥 = Q @ Q\n"
    [error] = await _open(client, uri, text)
    # `Q @ Q` starts after "α𝑥 = ": α is 1 UTF-16 unit, 𝑥 (outside the BMP) two.
    assert error.range.start == types.Position(2, 6) and error.range.end == types.Position(2, 11)
    hover = await client.text_document_hover_async(types.HoverParams(
        types.TextDocumentIdentifier(uri), types.Position(2, 10)))
    assert hover is not None and "`Q`" in hover.contents.value


@pytest.mark.asyncio(loop_scope="function")
async def test_definition_symbols_inlay_hints(client: LanguageClient, tmp_path):
    uri = (tmp_path / "e.attn").as_uri()
    await _open(client, uri, SPEC)
    location = await client.text_document_definition_async(types.DefinitionParams(
        types.TextDocumentIdentifier(uri), _position(SPEC, "P @ V", 0)))
    assert isinstance(location, types.Location)
    assert location.range.start == types.Position(5, 0)
    dim = await client.text_document_definition_async(types.DefinitionParams(
        types.TextDocumentIdentifier(uri), _position(SPEC, "sqrt(d)", 5)))
    assert dim.range.start == types.Position(0, 7)
    symbols = await client.text_document_document_symbol_async(types.DocumentSymbolParams(
        types.TextDocumentIdentifier(uri)))
    assert [s.name for s in symbols] == ["N", "d", "Q", "K", "V", "S", "P", "O"]
    assert next(s for s in symbols if s.name == "S").detail.endswith("[N, N]")
    hints = await client.text_document_inlay_hint_async(types.InlayHintParams(
        types.TextDocumentIdentifier(uri),
        types.Range(types.Position(0, 0), types.Position(10, 0))))
    labels = {(h.position.line, h.position.character): h.label for h in hints}
    assert labels[(4, 1)] == ": [N, N]" and labels[(6, 8)] == ": [N, d]"


@pytest.mark.asyncio(loop_scope="function")
async def test_code_actions_carry_the_fixes(client: LanguageClient, tmp_path):
    uri = (tmp_path / "f.attn").as_uri()
    text = "dim N, d\ninput Q: [N, d]\noutput S = Q @ Q.T  # noqa: SC401\n"
    [unused] = await _open(client, uri, text)
    assert unused.code == "SC501"
    actions = await client.text_document_code_action_async(types.CodeActionParams(
        types.TextDocumentIdentifier(uri), unused.range,
        types.CodeActionContext(diagnostics=[unused])))
    [action] = actions
    assert action.kind == types.CodeActionKind.QuickFix and action.is_preferred
    [edit] = action.edit.changes[uri]
    assert edit.new_text == "" and edit.range.start == types.Position(2, 18)


@pytest.mark.asyncio(loop_scope="function")
async def test_code_actions_carry_the_checkers_verified_fixes(client: LanguageClient, tmp_path):
    """`Q @ K` -> `Q @ K.T` (verified by re-checking) reaches the editor as a quick fix."""
    uri = (tmp_path / "k.attn").as_uri()
    [mismatch] = [d for d in await _open(client, uri, BROKEN) if d.code == "SC301"]
    actions = await client.text_document_code_action_async(types.CodeActionParams(
        types.TextDocumentIdentifier(uri), mismatch.range,
        types.CodeActionContext(diagnostics=[mismatch])))
    [action] = actions
    assert action.kind == types.CodeActionKind.QuickFix and "Q @ K.T" in action.title
    [edit] = action.edit.changes[uri]
    assert edit.new_text == "Q @ K.T" and edit.range.start == _position(BROKEN, "Q @ K")


@pytest.mark.asyncio(loop_scope="function")
async def test_unknown_documents_get_empty_answers(client: LanguageClient, tmp_path):
    uri = (tmp_path / "never-opened.attn").as_uri()
    hover = await client.text_document_hover_async(types.HoverParams(
        types.TextDocumentIdentifier(uri), types.Position(0, 0)))
    assert hover is None
    symbols = await client.text_document_document_symbol_async(types.DocumentSymbolParams(
        types.TextDocumentIdentifier(uri)))
    assert not symbols
    # The server is still alive and answers for a real document.
    assert not await _open(client, (tmp_path / "g.attn").as_uri(), SPEC)


@pytest.mark.asyncio(loop_scope="function")
async def test_diagnostics_after_a_series_of_edits_are_those_of_a_full_check(
        client: LanguageClient, tmp_path):
    """The server checks incrementally; after each incremental edit its diagnostics are
    exactly those of a fresh check of the same text (what `verify` reports)."""
    from shapecheck.api import check_text
    from shapecheck.lsp.analysis import Positions
    from shapecheck.lsp.server import lsp_diagnostic

    folder = tmp_path / "plain"
    folder.mkdir()
    (folder / "shapecheck.toml").write_text("", encoding="utf-8")  # default settings
    uri = (folder / "d.attn").as_uri()
    block = ("Q{i} = split_heads(X{i} @ W_Q, H)\nK{i} = split_heads(X{i} @ W_K, H)\n"
             "S{i}: [H, N, N] = Q{i} @ K{i}.T / sqrt(d)\nP{i} = softmax(S{i}, axis=row)\n"
             "O{i} = merge_heads(P{i} @ split_heads(X{i} @ W_Q, H))\n"
             "X{j} = layernorm(X{i} + O{i} @ W_O)\n")
    text = ("dim N, d, H\ndim D_model\nconstraint D_model == H * d\ninput X0: [N, D_model]\n"
            "param W_Q: [D_model, H * d]\nparam W_K: [D_model, H * d]\n"
            "param W_O: [H * d, D_model]\n") + "".join(block.format(i=i, j=i + 1) for i in range(4))
    await _open(client, uri, text)

    def expected(text: str) -> list[tuple]:
        positions = Positions(text)
        return [(d.code, d.range, d.message, d.severity) for d in (
            lsp_diagnostic(diagnostic, uri, positions)
            for diagnostic in check_text(text, warn_unknown_bindings=False).diagnostics)]

    edits = [("Q1 @ K1.T", "Q1 @ K1"), ("dim D_model\n", "dim D_model = 64\n"),
             ("", "# moved\n"), ("Q1 @ K1", "Q1 @ K1.T"), ("axis=row)\nO2", "axis=col)\nO2"),
             ("dim N, d, H\n", "dim N, H\n"), ("dim N, H\n", "dim N, d, H\n"),
             ("X2 = layernorm", "X2b = layernorm"), ("P0 = softmax(S0", "P0 = softmax(S1")]
    for version, (old, new) in enumerate(edits, start=2):
        start = text.index(old)
        before = text[:start]
        line, column = before.count("\n"), len(before) - before.rfind("\n") - 1
        end_text = before + old
        end = types.Position(end_text.count("\n"), len(end_text) - end_text.rfind("\n") - 1)
        client.text_document_did_change(types.DidChangeTextDocumentParams(
            types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            [types.TextDocumentContentChangePartial(
                range=types.Range(types.Position(line, column), end), text=new)]))
        text = before + new + text[start + len(old):]
        await client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        got = [(d.code, d.range, d.message, d.severity) for d in client.diagnostics[uri]]
        assert got == expected(text), (old, new)


@pytest.mark.asyncio(loop_scope="function")
async def test_hover_shows_each_version_and_the_builtin_of_a_spelling(client: LanguageClient,
                                                                        tmp_path):
    uri = (tmp_path / "versions.attn").as_uri()
    text = ("dim N, d, H\ninput x: [N, d]\nk = x.unsqueeze(0)\nk = k.transpose(0, 1)\n"
            "output y = k.sum(dim=0)\n")
    assert list(await _open(client, uri, text)) == []

    async def hover(needle: str, offset: int = 0) -> str:
        found = await client.text_document_hover_async(types.HoverParams(
            types.TextDocumentIdentifier(uri), _position(text, needle, offset)))
        assert found is not None, needle
        return found.contents.value

    first = await hover("k = x")
    assert "`k`" in first and "[1, N, d]" in first and "′" not in first
    second = await hover("k = k")
    assert "[N, 1, d]" in second and "version" in second
    assert "[1, N, d]" in await hover("k.transpose")  # reads the first version
    assert "`swapaxes`" in await hover("transpose", 1)
