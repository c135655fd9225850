"""Language server latency: the time from a change to its diagnostics.

Starts `shapecheck lsp` as an editor does (a subprocess on stdio), opens a generated
1,000-statement spec (bench_verify's stacked attention blocks), warms it up, then
sends incremental changes of four kinds, in turn, and measures on the client's clock
the time from writing each change to reading the `publishDiagnostics` of that version:

- middle: a statement in the middle of the file edited, alternating between a correct
  and a wrong version (`Q @ K.T` / `Q @ K`), so every change gives other diagnostics;
- top statement: the same edit in the first block (every statement below depends on it);
- top line: a line inserted above everything (every statement moves down);
- dim: `dim D_model` made `dim D_model = 512` and back (a dim every block uses).

Target: median < 100 ms on a warm server (issue 11). It prints each kind's median and
the median over all changes, and the server's own CPU time per change (from /proc:
user + system, 10 ms ticks), which a loaded machine does not inflate as it does wall time.
Each change's diagnostics are checked to be the expected ones (errors exactly when the
edit is the wrong version).

For context it also prints the time of a full, non-incremental check of the same
text in this process (`api.check_text`), side by side.

    python benchmarks/bench_lsp.py [--statements 1000] [--rounds 10]
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


KINDS = ("middle", "top statement", "top line", "dim")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--statements", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=10,
                        help="changes of each kind: 4 x 2 x ROUNDS changes (after a warm-up)")
    args = parser.parse_args()

    text = generate(args.statements)
    lines = text.split("\n")
    middle = next(i for i in range(len(lines) // 2, len(lines)) if lines[i].startswith("S"))
    top = next(i for i in range(len(lines)) if lines[i].startswith("S"))
    dim = lines.index("dim D_model")
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

    wall: dict[str, list[float]] = {kind: [] for kind in KINDS}
    cpu: dict[str, list[float]] = {kind: [] for kind in KINDS}
    version = 1
    inserted = 0  # lines inserted at the top so far

    def change(line: int, old: str, new: str, *, insert: bool = False) -> tuple[float, float, dict]:
        nonlocal version
        version += 1
        end = 0 if insert else len(old)
        edit = {"range": {"start": {"line": line, "character": 0},
                          "end": {"line": line, "character": end}}, "text": new}
        began = time.perf_counter()
        cpu_before = client.cpu_seconds()
        client.send("textDocument/didChange", {
            "textDocument": {"uri": uri, "version": version}, "contentChanges": [edit]})
        message = client.wait_diagnostics(version)
        return time.perf_counter() - began, client.cpu_seconds() - cpu_before, message

    warm_up = 2
    for round_ in range(args.rounds + warm_up):
        for kind in KINDS:
            for step in range(2):  # the wrong version, then the correct one again
                if kind == "top line":
                    taken = change(0, "", "# moved\n", insert=True)
                    inserted += 1
                    wrong = False
                elif kind == "dim":
                    old, new = ("dim D_model", "dim D_model = 512")[::1 if step == 0 else -1]
                    taken = change(dim + inserted, old, new)
                    wrong = False
                else:
                    line = (middle if kind == "middle" else top) + inserted
                    good = lines[middle if kind == "middle" else top]
                    bad = good.replace(".T", "", 1)  # Q @ K instead of Q @ K.T: an error
                    old, new = (good, bad) if step == 0 else (bad, good)
                    taken = change(line, old, new)
                    wrong = step == 0
                elapsed, used, message = taken
                errors = [d for d in message["params"]["diagnostics"] if d.get("severity") == 1]
                assert bool(errors) == wrong, (kind, step, message)
                if round_ >= warm_up:
                    wall[kind].append(elapsed)
                    cpu[kind].append(used)
    client.close()

    from shapecheck.api import check_text

    full: list[float] = []
    for _ in range(3):
        began = time.perf_counter()
        check_text(text)
        full.append(time.perf_counter() - began)

    def ms(value: float) -> str:
        return f"{value * 1000:.0f} ms"

    every = sorted(t for times in wall.values() for t in times)
    every_cpu = [t for times in cpu.values() for t in times]
    print(f"spec: {len(lines)} lines, {args.statements} statements (generated); "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"open -> first diagnostics (cold parse and check): {ms(first)}")
    print(f"change -> diagnostics ({len(every)} changes): median {ms(statistics.median(every))}, "
          f"p90 {ms(every[int(len(every) * 0.9) - 1])}, best {ms(every[0])}; "
          f"server CPU per change: median {ms(statistics.median(every_cpu))}  "
          f"(target: median < 100 ms)")
    for kind in KINDS:
        print(f"  {kind:<14} median {ms(statistics.median(wall[kind])):>7} wall, "
              f"{ms(statistics.median(cpu[kind])):>7} server CPU  ({len(wall[kind])} changes)")
    print(f"for comparison, a full check_text of the same text in-process: "
          f"median {ms(statistics.median(full))}")


if __name__ == "__main__":
    main()
