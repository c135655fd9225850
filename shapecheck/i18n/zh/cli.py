"""命令行自己的中文信息: :data:`shapecheck.cli.MESSAGES` 的翻译.

click 自己的解析错误和 ``--help`` 文本仍是英文 (见 docs/i18n.md)。
"""

from __future__ import annotations

MESSAGES = {
    "no_path": "没有给出路径; `shapecheck verify --help` 说明用法",
    "statistics_format": "--statistics 只输出 text 或 json",
    "nothing_checked": "没有要检查的 spec 文件 (文件夹指其下的 *.attn 文件, 不含 exclude 和 "
    ".gitignore 跳过的); 用 --allow-empty 可以接受这种情况",
    "cannot_read_stdin": "无法读取标准输入: {reason}",
    "lsp_missing": "语言服务器需要 pygls 和 lsprotocol: "
    "python -m pip install 'attn-shapecheck[lsp]'",
    "fix_and_diff": "--fix 会写入修正, --diff 只显示修正: 只能给出其中一个",
    "fixed": "在 {files} 个文件中修正了 {count} 个问题。",
    "would_fix": "将在 {files} 个文件中修正 {count} 个问题。",
    "cannot_read": "无法读取 {path}: {reason}",
    "cannot_write_summary": "无法写入步骤摘要 {path}: {reason}",
    "report_format": "无法从 `{output}` 判断报告格式; 请命名为 .html 或 .md, 或给出 --format html|md",
    "what_spec": "它所报告的 spec",
    "cannot_write": "无法写入 {path}: {reason}",
    "report_written": "已写入 {path}。",
    "unknown_code": "未知代码 `{code}`; `shapecheck explain` 会列出全部代码",
    "unknown_code_near": "未知代码 `{code}`; 是不是 `{name}`? `shapecheck explain` 会列出全部代码",
    "unknown_language": "{variable}={value} 不是 shapecheck 会说的语言 ({languages}); 使用英文",
    "aborted": "已中止",
    "interrupted": "已中断",
    "internal": "内部错误: {error}\n这是 shapecheck 的 bug; 设置 SHAPECHECK_DEBUG=1 可以看到回溯。",
}
