"""PyTorch 前端 (`shapecheck extract`, `verify model.py:Class`) 的中文文本:
:data:`shapecheck.torchfront.errors.MESSAGES` 的翻译."""

from __future__ import annotations

MESSAGES = {
    "target_syntax": "`{target}` 不是 FILE.py:NAME 或 MODULE:NAME 的形式 (例如 "
    "`model.py:CausalSelfAttention` 或 `model.py:make`)",
    "cannot_load": "无法加载 `{target}`: {reason}",
    "no_attribute": "`{target}` 没有属性 `{name}`",
    "instance": "`{target}` 是一个模块实例; 请给出它的类、接受其维度的工厂函数, 或一个无参数、返回 "
    "(module, inputs) 的工厂函数",
    "not_callable": "`{target}` 既不是类也不是函数",
    "build_failed": "构造 `{target}` 时抛出了 {error}",
    "not_a_module": "`{target}` 返回了 {type}, 不是 nn.Module",
    "factory_inputs": "`{target}` 只返回了模块, 没有输入, 且它没有线性层或层归一化可说明输入的宽度; "
    "请返回 (module, inputs), inputs 是按名字给出 forward 每个参数的 dict",
    "factory_returns": "`{target}` 返回了 {type}; 无参数的工厂函数应返回 (module, inputs), "
    "inputs 是按名字给出 forward 每个参数的 dict",
    "init_syntax": "`--init {value}` 不是 NAME=SIZE、NAME=DIM (维度的约定可跟在后面) 或 NAME=[SHAPE] "
    "的形式 (例如 `n_head=4`、`n_head=H`、`window=W window inclusive` 或 `query=[B, H, T, d_k]`)",
    "init_unknown": "`--init` 给出了 {names}, 但目标不接受这些参数 (它的参数: {parameters})",
    "no_width": "无法确定模块输入的宽度; 请给 forward 的参数加上 jaxtyping 标注, 或使用返回 "
    "(module, inputs) 的工厂函数",
    "config_unknown": "`{target}` 接受一个配置对象 `{name}`, 但 shapecheck 无法判断它的类; 请为它"
    "加上注解 (`{name}: ModelConfig`, 一个 dataclass 或 PretrainedConfig), 或者指定一个无参数的工厂"
    "函数: `def make(): return {target}(ModelConfig(...)), {{\"x\": torch.randn(2, 8, 64)}}`",
    "no_torch": "检查 Python 目标需要 PyTorch: python -m pip install torch",
    "not_configured": "`{path}` 是 Python 文件: 请指明其中的模块 (`{path}:ClassName` 或 "
    "`{path}:make`), 或在 [tool.shapecheck] 的 `modules` 中列出它的目标 (docs/torch.md)",
    "written": "已写入 {path} (来自 {target} 的 {statements} 条语句).",
    "traced_from": "由 `shapecheck extract` 从 {target} 追踪得到; 每条语句都注明了它来自的 Python 行",
    "apart_note": "工厂函数给出的大小相互重合 ({sizes}); 已在互不重合的大小下重新追踪, 以免把一个"
    "大小读成另一个",
    "coincide_note": "工厂函数给出的大小相互重合 ({sizes}), 且无法在互不重合的大小下追踪该模块: "
    "各维按其大小声明; 把调用处相等的大小合并, 可能掩盖两个大小只是碰巧相等的错误",
    "scale_note": "缩放 1/sqrt({size}) 读作 1/sqrt({chosen}), 即被收缩的宽度; {others} 的大小也是这个值",
    "unknown_operator_input": "代表 `{operator}` 的结果, shapecheck 不会降级这个算子",
    "in_layer": "在 {layers} 中",
    "in_layers": "在 {layers} 中: {count} 个共享代码的层, 只按其中第一个追踪一次",
    "covered": "`{target}`: 已检查 {layers} ({groups}){rest}",
    "covered_layers": "{count} 个注意力层",
    "covered_layer": "1 个注意力层",
    "covered_group": "{label}, 追踪一次",
    "covered_groups": "{count} 组, 每组追踪一次: {labels}",
    "covered_rest": "; 未追踪: {kinds}",
    "covered_kind": "{kind} ({modules})",
    "documented_tiled": "它的文档字符串说它就是 `{documented}`; 对 key/value 头 {heads} 以 n_rep = 2 "
    "运行, 得到 {got}, 而那个调用得到 {want}",
    "kind_embeddings": "嵌入层",
    "kind_norms": "归一化层",
    "kind_MLPs": "MLP",
    "kind_heads": "输出头",
    "mask_transposed": "它保留每个查询及其之后的键, 隐藏之前的键, 是转置了的因果掩码",
    "mask_shifted": "它保留每个查询之后最多 {shift} 个键, 是移位了 {shift} 的因果掩码",
    "mask_no_diagonal": "它隐藏了每个查询自己的键, 是缺了对角线的因果掩码",
    "mask_hides_all": "它对批中每个序列的每个查询隐藏了所有键",
    "mask_read_here": "该层在这里应用它",
}
