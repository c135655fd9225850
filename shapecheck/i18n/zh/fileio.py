"""读写文件的中文文本: :data:`shapecheck.fileio.MESSAGES` 的翻译."""

from __future__ import annotations

MESSAGES = {
    "fifo": "不是普通文件 (是 FIFO)",
    "char_device": "不是普通文件 (是字符设备)",
    "block_device": "不是普通文件 (是块设备)",
    "socket": "不是普通文件 (是 socket)",
    "folder": "是一个文件夹",
    "other": "不是普通文件",
    "empty": "路径为空",
    "no_folder": "它所在的文件夹不存在",
    "protected": "它是{what}, 会被覆盖",
    "symlink_loop": "这个符号链接没有指向文件",
    "no_temporary": "没有可用的临时文件名",
}
