"""真实模块与 spec 的绑定的中文文本: :data:`shapecheck.binding.MESSAGES` 的翻译."""

from __future__ import annotations

MESSAGES = {
    "no_match": "spec 的 {kind} `{name}` {shape} 与模块的任何张量都不匹配 ({candidates}); "
    "请用 --param {name}=KEY 指定一个 (KEY.T 表示它的转置)",
    "ambiguous": "spec 的 {kind} `{name}` {shape} 可能是 {candidates} 中的任何一个; "
    "请用 --param {name}={first} 选择",
    "no_key": "--param {name}={key}: 模块没有参数、缓冲区或张量属性 `{key}` (它有: {keys})",
    "key_shape": "--param {name}={key}: `{key}` 的形状是 {got}, 但 spec 的 `{name}` 在这里是 "
    "{expected}",
    "write_shape": "`{key}` 在 {bindings} 时的形状是 {got}, 但 spec 的 `{name}` 在那里需要 {expected} "
    "(实例保持构造时的尺寸: 用 --dim 固定它们)",
    "candidates_none": "它没有张量",
    "candidate": "`{key}` {shape}",
    "candidate_layout": "`{key}` {shape}, {layer} 按 {stored} 存储它, 而 spec 把 `{name}` 用作 {used}",
    "how_direct": "{name} -> {key}",
    "how_transposed": "{name} -> {key}.T ({layer} 按 [out, in] 存储)",
    "how_transposed_plain": "{name} -> {key}.T",
    "how_packed": "{name} -> {key}[{slice}]{transpose} (打包: {members})",
    "how_by_shape": " (按形状)",
    "unbound": "(保持模块构造时的值, 没有对应的 spec param: {keys})",
    "how_by_hand": " (--param)",
    "kind_param": "param",
    "kind_input": "input",
    "expression": "`{text}` 不是一致性检查能传入的值: 请用 spec 的名字、维度、数字、"
    "True/False/None、字符串和元组 (`(cos, sin)`)",
    "expression_name": "`{text}` 中的 `{name}` 不是 spec 的 {what} (它们是: {names})",
    "what_names": "input、param 或维度",
    "what_dims": "维度",
    "mask_kind": "--mask {name}={convention}: 请用 {choices} 之一",
}
