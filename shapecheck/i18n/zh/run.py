"""`shapecheck run` 的中文文本: :data:`shapecheck.backend.errors.MESSAGES` 的翻译."""

from __future__ import annotations

MESSAGES = {
    # spec 与它的维度
    "no_dims": "没有维度",
    "spec_errors": "spec 没有通过验证 ({count}); 无法运行",
    "unbound": "仍有未绑定的自由维度: {names}; 用 {flags} 绑定它们{derived}",
    "unbound_derived": " (然后 spec 会确定 {names})",
    "hint_cli": "--dim {name}=INT",
    "hint_api": "'{name}': ...",
    "hints_api": "dims={{{hints}}}",
    "bindings_from": "绑定: {bindings}",
    # 传入的数组
    "unknown_array": "`{name}` 不是这个 spec 的 input 或 param (它们是: {names})",
    "missing_arrays": "{names} 没有数组; 请传入每个 input 和 param (或用 run(..., seed=...) "
    "生成缺少的那些)",
    "not_an_array": "{kind} `{name}`: 需要 NumPy 数组, 得到的是 {type}",
    "rank": "{kind} `{name}` 声明为 {declared} (秩 {rank}), 但数组的形状是 {actual} (秩 {actual_rank})",
    "dim_conflict": "{kind} `{name}` 声明为 {declared}, 但数组的形状是 {actual}: 轴 {axis} 给出 "
    "{dim} = {got}, 而 {source} 给出 {dim} = {bound}",
    "entry_conflict": "{kind} `{name}` 声明为 {declared}, 在绑定的尺寸 ({bindings}) 下是 {expected}, "
    "但数组的形状是 {actual}: 轴 {axis} ({dim}) 在绑定下是 {bound}, 数组中是 {got}",
    "element_type": "{kind} `{name}` 声明为 {declared}, 应存放{wanted}, 但数组的元素类型是 {dtype}",
    "wanted_bool": " bool 值",
    "wanted_real": "实数 (浮点数或整数)",
    "non_finite": "{kind} `{name}` 含有 {count} 个非有限值 (NaN 或无穷); input 和 param 必须是有限值",
    "zero_axis": "{kind} `{name}` 的形状是 {actual}: 轴 {axis} 为空, 但维度是正整数",
    "source_dim": "--dim {dim}={value}",
    "source_array": "{kind} `{name}` (形状 {shape})",
    "source_spec": "spec ({definition})",
    "its_constraints": "它的约束",
    "generated_input": "N(0, 1)",
    "generated_param": "N(0, 1/fan_in), fan_in 为倒数第二轴",
    "generated_mask": "以概率 {fraction} 为 true, 每行至少一个 true",
    "generated_drop_mask": "以概率 {fraction} 为 false (保留: 该掩码陈述为 `drop`), 每行至少一个 false",
    # 文件
    "no_file": "{path}: 没有这个文件",
    "unreadable": "无法读取 {path}: {reason}",
    "not_npy": "{path}: 不是 .npy 文件 ({reason})",
    "not_npz": "{path}: 不是 .npz 归档 ({reason})",
    "no_magic": "它不是以 NumPy 文件头开始的",
    "npz_not_npy": "它是 .npz 归档; 请用 --inputs 传入",
    "npy_not_npz": "它是单个 .npy 数组; 请用 --input NAME=FILE 传入",
    "truncated": "文件比它的文件头所说的短: 被截断了?",
    "pickled": "{path}: 存放的是 Python 对象 (pickle 或 object 数组); 只加载数值和 bool 数组, "
    "从不使用 pickle",
    "npz_key": "{path}: 数组 `{key}` 无法加载 ({reason})",
    "npz_member": "{path}[{key}]",
    "npz_members": "有 {count} 个成员, 多于 {limit}",
    "npz_not_array": "不是 .npy 成员",
    "npz_twice": "这个键出现了两次",
    "negative_shape": "它的文件头在形状 {shape} 中给出了负的大小",
    "input_twice": "`{name}` 给了两次 (由 {first} 和 {second})",
    "input_syntax": "`{item}` 不是 NAME=FILE.npy",
    "cannot_write": "无法写入 {path}: {reason}",
    "save_stdout": "--save 需要一个文件名: 标准输出用于这次运行的报告",
    "what_spec": "正在运行的 spec",
    "what_input": "这次运行的一个输入数组",
    "dtype": "dtype 必须是 {choices} 之一, 得到的是 {dtype}",
    "backend": "backend 必须是 {choices} 之一, 得到的是 {backend}",
    "fused_option": "fused 必须是 {choices} 之一, 得到的是 {fused}",
    "device": "设备 {device} 不是 {backend} 后端能运行的设备 ({choices})",
    "no_cuda": "设备 {device}: torch 在这台机器上看不到 CUDA 设备",
    "no_torch": "torch 后端需要 PyTorch: pip install 'attn-shapecheck[torch]' ({reason})",
    "no_gpu_jax": "设备 {device}: jax 在这台机器上看不到 GPU (jax[cpu] 没有; CUDA 版本见 JAX 的安装指南)",
    "no_jax": "jax 后端需要 JAX: pip install 'attn-shapecheck[jax]' ({reason})",
    # 资源
    "memory": "在绑定的尺寸 ({bindings}) 下这次运行大约需要 {total}, 超过了 --max-memory {limit}; "
    "最大的张量是 {largest} {shape}, {size}",
    "tensor_label": "`{name}`",
    "temporary_label": "定义 `{name}` 的语句 (第 {line} 行) 的一个临时量",
    "too_large": "{what} {shape} 有 {size} 个元素: 超过了 NumPy 能索引的上限 ({limit}) "
    "(绑定的尺寸: {bindings})",
    "out_of_memory": "在绑定的尺寸 ({bindings}) 下 NumPy 无法为这次运行分配内存; 估计需要 {total} "
    "(--max-memory {limit}): 请减小尺寸, 或让 --max-memory 低于机器的空闲内存",
    # 内部故障: 检查器的 bug, 从来不是用户的错误
    "shape_bug": "检查器 bug: `{name}` (第 {line} 行) 运行时形状是 {actual}, 但检查器算出 {symbolic}, "
    "在绑定的尺寸 ({bindings}) 下是 {expected}; 请报告它",
    "dtype_bug": "后端 bug: `{name}` (第 {line} 行) 的元素类型是 {actual}, 应为 {expected}; 请报告它",
    "bug_unbound_shape": "后端 bug: 形状 {shape} 在绑定的尺寸下未知; 请报告它",
    "bug_no_type": "后端 bug: 检查器没有为第 {line} 行的表达式记录形状; 请报告它",
    "bug_unresolved_call": "后端 bug: 检查器没有解析第 {line} 行对 `{name}` 的调用; 请报告它",
    "bug_no_builtin": "后端 bug: 内置函数 `{name}` 没有 NumPy 实现; 请报告它",
    "bug_no_builtin_jax": "后端 bug: 内置函数 `{name}` 没有 JAX 实现; 请报告它",
    "bug_no_builtin_torch": "后端 bug: 内置函数 `{name}` 没有 torch 实现; 请报告它",
    "bug_not_value": "后端 bug: 无法把 {kind} 当作值执行 (第 {line} 行); 请报告它",
    # `shapecheck run` 的报告
    "report_header": "{path}: 以 {bindings} 运行 ({dtype}, {backend})",
    "report_plan": "  {text}",
    "report_generated": "  生成 (seed {seed}): {names} ~ {how}",
    "report_loaded": "  加载: {name} 来自 {source}",
    "report_output": "输出 {name}: 形状 {shape}, {dtype}, {stats}",
    "report_stats": "min {min:.6g}, max {max:.6g}, mean {mean:.6g}",
    "report_stats_bool": " ({size} 个中 {true} 个为 true)",
    "report_stats_nan": ", {count} 个 NaN",
    "report_checked": "已检查:",
    "report_check": "  {text}",
    "report_warning": "warning: {text}",
    "report_saved": "已把 {count} 个数组保存到 {path}",
    "report_error": "shapecheck: {text}",
    "report_internal": "shapecheck: 内部错误: {text}",
    "report_save_all_needs_save": "--save-all 需要 --save FILE.npz",
    # 不变量与警告
    "masked_rows": "`{name}` (第 {line} 行): {count} 行 softmax 全是 -inf (完全被掩盖), 得到 NaN",
    "non_finite_output": "输出 `{name}` 含有 {count} 个非有限值",
    "check_shapes": "{count} 条语句的形状在绑定的尺寸下与检查器的一致",
    "check_dtype": "每个张量都是 {dtype} (bool 掩码除外)",
    "check_dtype_complex": "每个张量都是 {dtype}, 复数张量是 {complex} (bool 掩码除外)",
    "check_softmax": "softmax `{name}` (第 {line} 行): 沿轴 {axis} 每一{what}之和为 1 "
    "(最大误差 {error:.1e})",
    "check_softmax_nan": "softmax `{name}` (第 {line} 行): 沿轴 {axis} 每一个不是 NaN 的{what}之和为 1 "
    "(最大误差 {error:.1e})",
    "what_row": "行",
    "what_column": "列",
    "what_slice": "片",
    "softmax_sum": "softmax `{name}` (第 {line} 行): 有一{what}沿轴 {axis} 之和为 {total!r}, 不是 1",
    # 融合的注意力 (numpy: 分块; torch: scaled_dot_product_attention)
    "check_softmax_fused": "softmax `{name}` (第 {line} 行), 已融合: 逐块检查, 沿轴 {axis} 每一{what}之和为 1 "
    "(最大误差 {error:.1e})",
    "check_softmax_sdpa": "softmax `{name}` (第 {line} 行), 已融合为 scaled_dot_product_attention: "
    "由 Q、K、V 重新算出的 {count} {what}沿轴 {axis} 之和为 1, 且与它的输出一致 (最大误差 {error:.1e})",
    "check_softmax_flex": "softmax `{name}` (第 {line} 行), 已融合为 flex_attention: 由 Q、K、V 和位置的"
    "函数重新算出的 {count} {what}沿轴 {axis} 之和为 1, 且与它的输出一致 (最大误差 {error:.1e})",
    "flex_bug": "后端 bug: softmax `{name}` (第 {line} 行) 的 flex_attention 与由 Q、K、V 和位置的函数"
    "重新算出的{what}相差 {error:.1e}; 请报告它",
    "sdpa_bug": "后端 bug: softmax `{name}` (第 {line} 行) 的 scaled_dot_product_attention 与由 Q、K、V "
    "重新算出的{what}相差 {error:.1e}; 请报告它",
    "check_softmax_dpa": "softmax `{name}` (第 {line} 行), 已融合为 jax.nn.dot_product_attention: "
    "由 Q、K、V 重新算出的 {count} {what}沿轴 {axis} 之和为 1, 且与它的输出一致 (最大误差 {error:.1e})",
    "dpa_bug": "后端 bug: softmax `{name}` (第 {line} 行) 的 jax.nn.dot_product_attention 与由 Q、K、V "
    "重新算出的{what}相差 {error:.1e}; 请报告它",
    "fused": "softmax `{name}` (第 {line} 行): {how}",
    "fused_workspace": "融合的 softmax `{name}` (第 {line} 行) 的分数块",
    "fused_blocks": "已融合, 每次 {rows} 行查询{keys}; {shape} 的匹配分数表从不整体构造",
    "fused_keys": ", 每次 {keys} 个 key (在线 softmax)",
    "fused_sdpa": "已融合为一次 scaled_dot_product_attention 调用 ({mask})",
    "fused_dpa": "已融合为一次 jax.nn.dot_product_attention 调用 ({mask})",
    "fused_flex": "已融合为一次 flex_attention 调用 (eager; 它的 mask_mod 和 score_mod 是规格中的位置的函数)",
    "fused_flex_ordered": "已融合为一次 flex_attention 调用 (eager; 它的 score_mod 按规格的顺序施加对分数的运算, "
    "其中包括软截断的 tanh)",
    "fused_positions": "; 它的掩码和偏置是位置的函数, 逐块求值",
    "sdpa_no_mask": "无掩码",
    "sdpa_causal": "is_causal",
    "sdpa_bool": "bool 掩码",
    "sdpa_float": "加性掩码",
    "not_fused": "softmax `{name}` (第 {line} 行): 未融合: {reason}",
    "fused_off": "--fused off",
    "fused_off_save_all": "保留了每个中间结果 (--save-all)",
    "fused_no_scores": "匹配分数不是分析能认出的 Q 与 K 的乘积",
    "fused_changed": "权重在 softmax 与乘 V 之间被改动了",
    "fused_axis": "与 V 的乘积没有沿 softmax 归一化的轴对权重求和 (SC402)",
    "fused_axis_unknown": "不知道与 V 的乘积沿权重的哪个轴求和",
    "fused_handwritten": "softmax 是手写展开的",
    "fused_unknown_step": "匹配分数经过了缩放、偏置、掩码、软截断以外的运算",
    "fused_fill": "掩码的填充值不是数",
    "fused_needed": "匹配分数或权重在别处还要用 (是输出, 或被再次读取)",
    "fused_layout": "Q、K、V、偏置或掩码中有一个轴在注意力中没有角色",
    "fused_not_sdpa": "掩码把分数替换为有限值, 或缩放不是正的常数: scaled_dot_product_attention "
    "的任何形式都算不出它",
    "fused_not_dpa": "掩码把分数替换为有限值, 或缩放不是正的常数: jax.nn.dot_product_attention "
    "的任何形式都算不出它",
    "fused_not_sdpa_capped": "匹配分数经过了软截断 (`tanh`): scaled_dot_product_attention "
    "的任何形式都算不出它",
    "fused_not_flex_scale": "匹配分数经过了软截断, 且有一个缩放不是常数: flex_attention 调用的 score_mod "
    "只施加数",
    "fused_not_dpa_capped": "匹配分数经过了软截断 (`tanh`): jax.nn.dot_product_attention "
    "的任何形式都算不出它",
    "fused_dpa_float64": "jax.nn.dot_product_attention 总以 float32 计算 softmax, 所以 float64 的运行不融合",
    "fused_dpa_features": "V 的特征数与 K 的不同: jax.nn.dot_product_attention 要求 value 的形状与 key 相同",
    "check_weights": "`{contraction}` (第 {line} 行): 权重 `{weights}` 沿它求和的轴 (轴 {axes}) "
    "之和为 1 (最大误差 {error:.1e})",
    "check_weights_nan": "`{contraction}` (第 {line} 行): 权重 `{weights}` 中不是 NaN、也不全为零的部分沿它"
    "求和的轴 (轴 {axes}) 之和为 1 (最大误差 {error:.1e})",
    "weights_sum": "`{contraction}` (第 {line} 行) 求和的权重 `{weights}` 沿轴 {axes} 加起来不是 1: "
    "{count} 片不对, 其中一片之和为 {total:.6g}; 输出不是加权平均 (softmax 之后的掩码或改动, "
    "或者 softmax 的轴不对)",
    # issue 21: 整数张量与收集
    "index_range": "第 {line} 行: `{index}` 含有 {value}, 作为 `{operand}` 的轴 {axis} 上的位置, 但该轴只有 {size} 个元素 (位置 0 到 {last})",
    "index_not_whole": "第 {line} 行: `{index}` 含有 {value} 作为位置, 它不是整数",
    "wanted_int": "整数",
    "int_not_whole": "{kind} `{name}` 声明为 {declared}, 但含有 {value}, 它不是整数",
    "int_too_large": "{kind} `{name}` 含有 {value}, 超过了 {limit}, 即 {dtype} 运行能精确表示的最大整数",
    "generated_int": "0 到 {high} 的整数",
    "generated_positions": "从 0 到所索引的轴的大小 (不含) 的整数",
}
