"""The language server on Python files (issue 35): what a save costs, and what it costs the
`.attn` side.

Starts `shapecheck lsp` as an editor does, in a folder whose configuration lists a module
(`model.py:Attention`, the multi-head attention of tests/test_lsp_python.py), and measures on
the client's clock, side by side in one run:

- save: from `didSave` to the module's diagnostics (the saves alternate between the softmax
  over the queries and the fixed one, so each publishes other diagnostics);
- export: one trace and check of the same target in this process
  (`pytorch.front.sourcemap.check`, torch already imported) — the issue's yardstick: a save's
  diagnostics should arrive within about one export;
- spec, idle / spec, tracing: from a change of a small `.attn` document to its diagnostics,
  with no trace running, and sent right after a save (the trace in flight in the worker).

    python benchmarks/bench_lsp_python.py [--rounds 6]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))
from bench_lsp import Client  # noqa: E402
from test_lsp_python import FIXED, MODULE  # noqa: E402

SPECS = ("dim N, d\ninput Q: [N, d]\noutput S = Q @ Q.T\n", "dim N, d\ninput Q: [N, d]\noutput S = Q @ Q\n")


def _published(client: Client, uri: str) -> tuple[float, dict[str, Any]]:
    while True:
        message = client.read()
        if message.get("method") == "textDocument/publishDiagnostics" and \
                message["params"]["uri"] == uri:
            return time.perf_counter(), message["params"]


def _change(client: Client, uri: str, version: int, text: str) -> None:
    client.send("textDocument/didChange", {"textDocument": {"uri": uri, "version": version},
                                           "contentChanges": [{"text": text}]})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="bench_lsp_python"))
    (folder / "pyproject.toml").write_text('[tool.shapecheck]\nmodules = ["model.py:Attention"]\n')
    model = folder / "model.py"
    model.write_text(MODULE)
    os.chdir(folder)
    client = Client()
    ident = client.send("initialize", {"processId": None, "rootUri": folder.as_uri(),
                                       "capabilities": {}}, request=True)
    assert ident is not None
    client.wait_response(ident)
    client.send("initialized", {})
    uri, spec = model.as_uri(), (folder / "a.attn").as_uri()
    client.send("textDocument/didOpen", {"textDocument": {
        "uri": uri, "languageId": "python", "version": 1, "text": MODULE}})
    _published(client, uri)  # the first trace: the worker server imports torch meanwhile
    client.send("textDocument/didOpen", {"textDocument": {
        "uri": spec, "languageId": "attn", "version": 1, "text": SPECS[0]}})
    _published(client, spec)

    saves, idle, tracing = [], [], []
    version = 1
    for _ in range(args.rounds):
        for text in (FIXED, MODULE):
            version += 1
            _change(client, spec, version, SPECS[version % 2])  # idle: no trace in flight
            started = time.perf_counter()
            idle.append(_published(client, spec)[0] - started)
            model.write_text(text)
            started = time.perf_counter()
            client.send("textDocument/didSave", {"textDocument": {"uri": uri}})
            version += 1
            sent = time.perf_counter()
            _change(client, spec, version, SPECS[version % 2])
            done: dict[str, float] = {}
            while len(done) < 2:
                at, params = _either(client, uri, spec)
                done.setdefault(params["uri"], at)
            tracing.append(done[spec] - sent)
            saves.append(done[uri] - started)
    client.close()

    from shapecheck.pytorch.front.sourcemap import check

    check(f"{model}:Attention")  # torch imported, as in the worker server
    exports = []
    for _ in range(args.rounds):
        started = time.perf_counter()
        check(f"{model}:Attention")
        exports.append(time.perf_counter() - started)

    def ms(values: list[float]) -> str:
        return f"{statistics.median(values) * 1000:8.0f} ms (median of {len(values)})"

    print(f"save -> diagnostics      {ms(saves)}")
    print(f"one export, in process   {ms(exports)}")
    print(f"spec change, idle        {ms(idle)}")
    print(f"spec change, tracing     {ms(tracing)}")


def _either(client: Client, *uris: str) -> tuple[float, dict[str, Any]]:
    while True:
        message = client.read()
        if message.get("method") == "textDocument/publishDiagnostics" and \
                message["params"]["uri"] in uris:
            return time.perf_counter(), message["params"]


if __name__ == "__main__":
    main()
