"""语言服务器 (``shapecheck lsp``) 悬停提示的中文: :data:`shapecheck.lsp.server.TEXT` 的翻译."""

from __future__ import annotations

TEXT = {
    "input": "输入",
    "param": "参数",
    "defined": "张量",
    "shape_at": "在 {bindings} 时: `{shape}`",
    "dim_free": "自由维度",
    "dim_fixed": "固定维度: `{name} = {value}`",
    "dim_derived": "派生维度: `{name} = {definition}`",
    "dim_value": "在配置的维度下 `{name} = {value}`",
    "config_problem": "shapecheck: 配置没有被使用: {problem}",
    "version": "这一行的 `{name}` 版本 (这个名字被重新绑定或写入过)",
    "spelling": "**`{written}`** 就是内置函数 `{builtin}`: {doc}",
    "traced": "这一行追踪到的形状:",
}
