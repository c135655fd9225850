"""`shapecheck conform` 的中文文本: :data:`shapecheck.conform.MESSAGES` 的翻译."""

from __future__ import annotations

MESSAGES = {
    # 目标函数与名字映射 (用法错误, 退出码 2)
    "target_syntax": "`{target}` 不是 MODULE:FUNCTION 的形式 (例如 `mypackage.attention:forward` "
    "或 `path/to/file.py:forward`)",
    "no_module": "无法导入 `{module}`: {reason}",
    "import_failed": "导入 `{module}` 时抛出了 {error}",
    "no_attribute": "`{module}` 没有属性 `{name}`",
    "not_callable": "`{target}` 是 {type}, 不是函数",
    "a_class": "`{target}` 是一个类, 但不是 `nn.Module`; 请给出一个函数、一个 `nn.Module` 类或工厂, "
    "或一个实例, 这样调用它才是在计算输出",
    "unknown_name": "`{name}` 不是这个 spec 的 input、param、output 或维度 (它们是: {names})",
    "layout_name": "`{name}` 不是这个 spec 的 input、param 或 output, 所以没有布局可言 (它们是: {names})",
    "bad_layout": "`{name}` 的布局 `{layout}` {shape} 不合适: 请用 `transpose` (交换最后两个轴) "
    "或 0..{last} 的一个排列",
    "missing_parameters": "函数没有参数 {names} (它的参数: {parameters}); 用 {hints} 对应起来",
    "hint_name": "--name {spec}={parameter}",
    "unfilled_parameters": "函数的参数 {names} 没有值: spec 中没有叫这个名字的 input、param 或维度 "
    "(用 --name {spec}={first} 对应一个, 或用 --arg {first}=VALUE 给出它)",
    "arg_unknown": "--arg {names}: 函数没有这个名字的参数, 也没有 **kwargs (它的参数: {parameters})",
    "init_unknown": "--init {names}: 工厂没有这个名字的参数 (它的参数: {parameters})",
    "factory_unfilled": "工厂的参数 `{name}` 没有值: 它不是 spec 的维度, 也不是 `dtype` 或 `device` "
    "(用 --init {name}=EXPR 给出它)",
    "factory_result": "工厂返回了 {type}, 而不是 `nn.Module` (或一个模块加一个额外 forward 参数的 dict)",
    "input_hint": "  spec 的输入 {names} 也不是 forward 的参数 (forward 接受: {parameters}); "
    "请用 {hint} 传入",
    "layout_state": "--layout {name}: `{name}` 被写入模块的状态, 而不是作为参数传入; "
    "它的方向由层决定 (用 --param {name}=KEY 或 KEY.T 选择)",
    "mask_not_bool": "--mask {name}=...: `{name}` 不是 spec 的 bool 输入",
    "mask_numpy": "--mask 把掩码转换成张量的约定; 它需要一个 PyTorch 目标",
    "param_name": "--param {name}=...: `{name}` 不是 spec 的 input 或 param (它们是: {names})",
    "output_name": "--output {name}=...: `{name}` 不是 spec 的 output (它们是: {names})",
    "positional_only": "函数的参数 {names} 只能按位置传入; 一致性检查按名字传入每个参数",
    "framework": "framework 必须是 {choices} 之一, 得到的是 `{framework}`",
    "cases": "用例数必须是正整数, 得到的是 {cases}",
    "no_bindings": "在尺寸不超过 {high} 的 {attempts} 个候选中, 没有找到自由维度 {names} 的可行绑定; "
    "请用 --dim 绑定其中一些",
    # 结果
    "header": "{spec}: {function} 的一致性检查 ({framework}, {dtype})",
    "case_ok": "  通过  {bindings}",
    "case_failed": "  失败  {bindings}",
    "bound": "  模块的状态, 在第一个绑定时匹配 (用 --param 更改):",
    "not_compared": "  未比较: {entries}",
    "entry": "返回的第 {key} 项",
    "spec_output": "spec 的输出 `{name}`",
    "float32_inside": "  误差是 float32 的舍入: 目标内部用 float32 计算 (一次转换、float32 的表、"
    "softmax(dtype=float32)); 请用 --dtype float32 比较",
    "conforms": "一致: 在 {count} 组绑定下, 每个输出都与 spec 相符",
    "zero_rows": "  按 spec 中完全被掩盖的行为零 (SDPA 和 FlexAttention 对看不到任何键的查询给出的值) "
    "比较, 这是 spec 两种读法中较接近的一种",
    "failed_at": "输出 `{output}` 在 {bindings} 下与 spec 不符{shrunk}",
    "raised_at": "函数在 {bindings} 下抛出了异常{shrunk}: {error}",
    "shrunk": " (最小的失败绑定; 最初在 {first} 下失败)",
    "values": "  最大绝对误差 {max_abs:.3g}, 最大相对误差 {max_rel:.3g} (允许: |误差| <= "
    "{atol:g} + {rtol:g}·|期望值|, 按 {tolerance_dtype})",
    "worst": "  最差的位置在下标 {index}: spec 给出 {expected}, 函数给出 {got}",
    "count": "  {size} 个元素中有 {count} 个超出容差",
    "shape": "  它的形状是 {got}, 但 spec 的形状是 {symbolic}, 在这组绑定下是 {expected}",
    "layout_rank": "  它的形状是 {got}, 与它的布局 `{layout}` 不符",
    "not_array": "  函数为它返回了 {type}, 不是数组",
    "missing_output": "  函数的结果中没有 `{key}` 这一项 (它有: {keys})",
    "count_outputs": "  函数返回了 {got} 个值; spec 有 {count} 个输出: {names}",
    "single_value": "  函数只返回了一个值; spec 有 {count} 个输出: {names} (请按这个顺序返回一个 tuple, "
    "或按名字返回一个映射)",
    "function_label": "`{target}`",
    # 命令
    "cannot_read": "无法读取 {path}: {reason}",
    "spec_errors": "shapecheck: spec 没有通过验证, 任何实现都无从与它一致",
    "error": "shapecheck: {text}",
    "pair_syntax": "`{item}` 不是 NAME=VALUE 的形式",
    "pair_twice": "`{name}` 给了两次",
    "no_such_file": "没有这个文件",
    "not_python": "不是 Python 文件",
    "type_none": "None",
    "type_a": "一个 {type}",
}
