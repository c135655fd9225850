"""选项取值的中文文本: :data:`shapecheck.options.MESSAGES` 的翻译."""

from __future__ import annotations

MESSAGES = {
    "binding_syntax": "`{item}` 不是 NAME=INT",
    "binding_name": "`{name}` 不是维度名",
    "binding_value": "`{name}`: 值必须是正整数, 得到的是 {value}",
    "binding_too_large": "`{name}`: {value} 太大 (最多 {limit} 位)",
    "binding_twice": "`{name}` 绑定了两次",
    "bindings_type": "绑定必须是从维度名到整数的映射, 得到的是 {type}",
    "size": "`{text}` 不是一个大小 (例如: 4GiB、512MiB、2GB、1000000、unlimited)",
    "size_small": "`{text}` 小于一个字节",
    "size_type": "大小是字节数、'4GiB' 这样的字符串或 None; 得到的是 {type}",
    "many_digits": "一个 {digits} 位的数",
    "huge_number": "一个超过 3000 位的数",
}
