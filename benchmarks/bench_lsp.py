"""Language server latency: the time from a change to its diagnostics, for every kind of change.

Starts `shapecheck lsp` as an editor does (a subprocess on stdio), opens a generated
1,000-statement spec (bench_verify's stacked attention blocks), warms it up, then sends
changes of each kind below, in turn, each as a pair (the edit, then the edit undone), and
measures on the client's clock the time from writing each change to reading the
`publishDiagnostics` of that version (issue 36):

- middle `.T`: a statement in the middle edited, alternately wrong and right
  (`Q @ K.T` / `Q @ K`), so every change gives other diagnostics;
- middle wrap: the right side of that statement wrapped in a call (`relu(...)`) and back;
- top statement: the `.T` edit in the first block (every statement below depends on it);
- last statement: the `.T` edit in the last block;
- top line: a comment line inserted above everything, then deleted (every statement moves);
- inserted line: a statement inserted in the middle, then deleted (those below move);
- pasted block: eight statements pasted in the middle, then deleted;
- dim: `dim D_model` made `dim D_model = 512` and back (a dim every block uses);
- constraint: `constraint D_model == H * d` made `constraint D_model == H * d * 1` and back.

Each kind is sent both ways a client sends a change (`--sync`): a range with the new text
(incremental sync) and the whole new text (full sync). Target: every kind's median under
100 ms on a warm server (issue 36). It prints a table: each kind and sync's median wall time
and the server's own CPU time per change (from /proc: user + system, 10 ms ticks), which a
loaded machine does not inflate as it does wall time, and the load average. Each change's
diagnostics are checked to be the expected ones (errors exactly when the edit is wrong).

For context it also prints the time of a full, non-incremental check of the same
text in this process (`api.check_text`).

    python benchmarks/bench_lsp.py [--statements 1000] [--rounds 6] [--sync both|range|full]
        [--kinds "middle wrap,dim"]
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
from typing import Any, NamedTuple

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


PASTED = """\
Qp = split_heads(X{k} @ W_Q, H)
Kp = split_heads(X{k} @ W_K, H)
Vp = split_heads(X{k} @ W_V, H)
Sp: [H, N, N] = Qp @ Kp.T / sqrt(d)
Pp = softmax(Sp, axis=row)
Op = merge_heads(Pp @ Vp)
Yp: [N, D_model] = Op @ W_O
Zp = layernorm(X{k} + Yp)
"""


class Edit(NamedTuple):
    line: int  # 0-based: the old text starts at this line's first character
    old: str
    new: str
    wrong: bool  # the document has errors after it


def _pair(line: int, old: str, new: str, *, wrong: bool = False) -> tuple[Edit, Edit]:
    """An edit and its undoing (the undone document is correct)."""
    return Edit(line, old, new, wrong), Edit(line, new, old, False)


def kinds_of(lines: list[str]) -> dict[str, tuple[Edit, Edit]]:
    """Each kind of change, as an edit and its undoing, on the generated spec's lines."""
    statements = [i for i, line in enumerate(lines) if line.startswith("S")]
    middle = next(i for i in statements if i >= len(lines) // 2)
    top, last = statements[0], statements[-1]
    block = next(i for i in range(middle, len(lines)) if lines[i].startswith("X"))
    source = lines[block].split(" ", 1)[0]  # the residual X{k} defined there

    def dot_t(line: int) -> tuple[Edit, Edit]:
        return _pair(line, lines[line], lines[line].replace(".T", "", 1), wrong=True)

    target, _, right = lines[middle].partition(" = ")
    return {
        "middle .T": dot_t(middle),
        "middle wrap": _pair(middle, lines[middle], f"{target} = relu({right})"),
        "top statement": dot_t(top),
        "last statement": dot_t(last),
        "top line": _pair(0, "", "# a comment above everything\n"),
        "inserted line": _pair(block + 1, "", f"Extra = relu({source} @ W_Q)\n"),
        "pasted block": _pair(block + 1, "", PASTED.format(k=source[1:])),
        "dim": _pair(lines.index("dim D_model"), "dim D_model", "dim D_model = 512"),
        "constraint": _pair(lines.index("constraint D_model == H * d"),
                            "constraint D_model == H * d", "constraint D_model == H * d * 1"),
    }


def apply(text: str, edit: Edit) -> tuple[str, dict[str, Any]]:
    """The text after the edit, and the edit as a range change of the protocol."""
    offset = sum(len(line) + 1 for line in text.split("\n", edit.line)[:edit.line])
    assert text[offset:offset + len(edit.old)] == edit.old, (edit, text[offset:offset + 80])
    old_lines = edit.old.split("\n")
    end = {"line": edit.line + len(old_lines) - 1,
           "character": len(old_lines[-1]) if len(old_lines) > 1 else len(edit.old)}
    change = {"range": {"start": {"line": edit.line, "character": 0}, "end": end},
              "text": edit.new}
    return text[:offset] + edit.new + text[offset + len(edit.old):], change


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--statements", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=6,
                        help="pairs of changes of each kind and sync (after a warm-up pair)")
    parser.add_argument("--sync", choices=("both", "range", "full"), default="both")
    parser.add_argument("--kinds", default="", help="comma-separated kinds (default: all)")
    args = parser.parse_args()

    text = generate(args.statements)
    kinds = kinds_of(text.split("\n"))
    if args.kinds:
        kinds = {name: kinds[name] for name in args.kinds.split(",")}
    syncs = ("range", "full") if args.sync == "both" else (args.sync,)
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

    wall: dict[tuple[str, str], list[float]] = {}
    cpu: dict[tuple[str, str], list[float]] = {}
    version = 1
    loads = [os.getloadavg()[0]]

    def change(edit: Edit, sync: str) -> tuple[float, float]:
        nonlocal version, text
        version += 1
        text, ranged = apply(text, edit)
        began = time.perf_counter()
        cpu_before = client.cpu_seconds()
        client.send("textDocument/didChange", {
            "textDocument": {"uri": uri, "version": version},
            "contentChanges": [ranged if sync == "range" else {"text": text}]})
        message = client.wait_diagnostics(version)
        elapsed, used = time.perf_counter() - began, client.cpu_seconds() - cpu_before
        errors = [d for d in message["params"]["diagnostics"] if d.get("severity") == 1]
        assert bool(errors) == edit.wrong, (edit, errors[:2])
        return elapsed, used

    warm_up = 1
    for round_ in range(args.rounds + warm_up):
        for name, pair in kinds.items():  # alternated, so every kind sees the same load
            for sync in syncs:
                for edit in pair:
                    elapsed, used = change(edit, sync)
                    if round_ >= warm_up:
                        wall.setdefault((name, sync), []).append(elapsed)
                        cpu.setdefault((name, sync), []).append(used)
        loads.append(os.getloadavg()[0])
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
    print(f"spec: {text.count(chr(10))} lines, {args.statements} statements (generated); "
          f"load average {min(loads):.1f}-{max(loads):.1f} on {os.cpu_count()} cores")
    print(f"open -> first diagnostics (cold parse and check): {ms(first)}")
    print(f"change -> diagnostics ({len(every)} changes): median {ms(statistics.median(every))}, "
          f"p90 {ms(every[int(len(every) * 0.9) - 1])}, best {ms(every[0])}; "
          f"server CPU per change: median {ms(statistics.median(every_cpu))}  "
          f"(target: every kind's median < 100 ms)")
    print(f"  {'kind':<16}" + "".join(f"{sync + ': wall / server CPU':>30}" for sync in syncs))
    worst = 0.0
    for name in kinds:
        cells = []
        for sync in syncs:
            median = statistics.median(wall[(name, sync)])
            worst = max(worst, median)
            cells.append(f"{ms(median):>7} / {ms(statistics.median(cpu[(name, sync)])):>6}"
                         f" ({len(wall[(name, sync)])})")
        print(f"  {name:<16}" + "".join(f"{cell:>30}" for cell in cells))
    print(f"slowest kind's median: {ms(worst)} (target < 100 ms: "
          f"{'met' if worst < 0.1 else 'NOT met'})")
    print(f"for comparison, a full check_text of the same text in-process: "
          f"median {ms(statistics.median(full))}")


if __name__ == "__main__":
    main()
