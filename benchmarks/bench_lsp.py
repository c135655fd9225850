"""Language server latency: the time from a change to its diagnostics.

Starts `shapecheck lsp` as an editor does (a subprocess on stdio), opens a generated
1,000-statement spec (bench_verify's stacked attention blocks), warms it up, then
sends incremental changes -- each edits one statement in the middle of the file,
alternating between a correct and a wrong version, so every change gives different
diagnostics -- and measures, on the client's clock, the time from writing the change
to reading the `publishDiagnostics` of that version. Every few changes a line is
inserted at the top instead, which moves every statement below (the slow path of
the incremental parse). Target: median < 100 ms on a warm server. It also prints the
server's own CPU time per change (from /proc), which a loaded machine does not inflate.

For context it also prints the time of a full, non-incremental check of the same
text in this process (`api.check_text`), side by side.

    python benchmarks/bench_lsp.py [--statements 1000] [--changes 60]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_verify import generate  # noqa: E402


class Client:
    def __init__(self) -> None:
        self.process = subprocess.Popen([sys.executable, "-m", "shapecheck", "lsp"],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.next_id = 0

    def send(self, method: str, params: Any, *, request: bool = False) -> int | None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
        ident = None
        if request:
            self.next_id += 1
            ident = message["id"] = self.next_id
        body = json.dumps(message).encode("utf-8")
        assert self.process.stdin is not None
        self.process.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.process.stdin.flush()
        return ident

    def read(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        length = 0
        while True:
            line = self.process.stdout.readline()
            if not line:
                raise RuntimeError("the server closed its output")
            if line in (b"\r\n", b"\n"):
                break
            name, _, value = line.decode("ascii").partition(":")
            if name.lower() == "content-length":
                length = int(value)
        return json.loads(self.process.stdout.read(length))

    def wait_response(self, ident: int) -> dict[str, Any]:
        while True:
            message = self.read()
            if message.get("id") == ident and "method" not in message:
                return message

    def wait_diagnostics(self, version: int) -> dict[str, Any]:
        while True:
            message = self.read()
            if message.get("method") == "textDocument/publishDiagnostics" and \
                    message["params"].get("version") == version:
                return message

    def cpu_seconds(self) -> float:
        """The server's CPU time so far (user + system), from /proc; 0 where there is none."""
        try:
            fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def close(self) -> None:
        ident = self.send("shutdown", None, request=True)
        assert ident is not None
        self.wait_response(ident)
        self.send("exit", None)
        self.process.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--statements", type=int, default=1000)
    parser.add_argument("--changes", type=int, default=60)
    args = parser.parse_args()

    text = generate(args.statements)
    lines = text.split("\n")
    target = next(i for i in range(len(lines) // 2, len(lines)) if lines[i].startswith("S"))
    good = lines[target]
    bad = good.replace(".T", "", 1)  # Q @ K instead of Q @ K.T: an error
    uri = Path(os.getcwd(), "bench_lsp.attn").as_uri()

    client = Client()
    ident = client.send("initialize", {"processId": os.getpid(), "rootUri": None,
                                       "capabilities": {}}, request=True)
    assert ident is not None
    client.wait_response(ident)
    client.send("initialized", {})
    client.send("textDocument/didOpen", {"textDocument": {
        "uri": uri, "languageId": "attn", "version": 1, "text": text}})
    started = time.perf_counter()
    client.wait_diagnostics(1)
    first = time.perf_counter() - started

    timings: list[float] = []
    shifted: list[float] = []
    cpu: list[float] = []
    version = 1
    current = good
    for change in range(args.changes + 5):
        version += 1
        if change % 10 == 9:  # insert a line at the top: every statement moves down
            edit = {"range": {"start": {"line": 0, "character": 0},
                              "end": {"line": 0, "character": 0}}, "text": "# moved\n"}
            target += 1
        else:
            replacement = bad if current == good else good
            edit = {"range": {"start": {"line": target, "character": 0},
                              "end": {"line": target, "character": len(current)}},
                    "text": replacement}
            current = replacement
        began = time.perf_counter()
        cpu_before = client.cpu_seconds()
        client.send("textDocument/didChange", {
            "textDocument": {"uri": uri, "version": version}, "contentChanges": [edit]})
        message = client.wait_diagnostics(version)
        elapsed = time.perf_counter() - began
        cpu_used = client.cpu_seconds() - cpu_before
        expected_error = current == bad
        assert bool(message["params"]["diagnostics"]) == expected_error, message
        if change >= 5:  # the first few warm the server up
            (shifted if change % 10 == 9 else timings).append(elapsed)
            if change % 10 != 9:
                cpu.append(cpu_used)
    client.close()

    from shapecheck.api import check_text

    full: list[float] = []
    for _ in range(5):
        began = time.perf_counter()
        check_text(text)
        full.append(time.perf_counter() - began)

    def ms(value: float) -> str:
        return f"{value * 1000:.0f} ms"

    timings.sort()
    print(f"spec: {len(lines)} lines, {args.statements} statements (generated)")
    print(f"open -> first diagnostics (cold parse and check): {ms(first)}")
    print(f"change -> diagnostics, one statement edited ({len(timings)} changes): "
          f"median {ms(statistics.median(timings))}, "
          f"p90 {ms(timings[int(len(timings) * 0.9) - 1])}, best {ms(timings[0])}  "
          f"(target: median < 100 ms)")
    if cpu and max(cpu) > 0:
        print(f"  the server's CPU time per change: median {ms(statistics.median(cpu))} "
              f"(on a shared machine, wall time also counts waiting for a core; "
              f"/proc ticks are 10 ms)")
    if shifted:
        print(f"change -> diagnostics, a line inserted above everything ({len(shifted)}): "
              f"median {ms(statistics.median(shifted))}")
    print(f"for comparison, a full check_text of the same text in-process: "
          f"median {ms(statistics.median(full))}")


if __name__ == "__main__":
    main()
