"""诊断代码的中文文本: :mod:`shapecheck.codes` 中每张表的翻译 (键与 ``{字段}`` 相同)."""

from __future__ import annotations

# 每个代码: summary (一句话), message (诊断信息, 字段与英文相同), what / why / fix (explain),
# example (与英文相同的 spec, 只有 `#` 注释行是中文).
CODES: dict[str, dict[str, str]] = {
    "SC601": dict(
        summary="无法追踪该模块",
        message="torch.export 无法追踪 `{target}`: {reason}",
        what="`verify` 和 `extract` 用 `torch.export` (批大小和序列长度为符号) 追踪 PyTorch 模块, "
        "并检查它记录下的计算图. 控制流依赖数据 (`if x.sum() > 0:`) 或依赖必须保持符号的尺寸的代码"
        "无法追踪; 诊断在中断追踪的那一行给出 torch 的原因.",
        why="没有追踪成功的模块什么也没有被检查: 这会被报告, 绝不会被当作通过.",
        example="# (Python) def forward(self, x):\n#     if x.sum() > 0:   # error[SC601]\n"
        "#         return x",
        fix="用张量运算 (`torch.where`) 写出这个分支, 或把它移出 `forward`.",
    ),
    "SC602": dict(
        summary="降级过程不认识的算子",
        message="`{operator}` 没有降级为 spec 语言; 它的结果 `{name}` 按追踪到的形状作为 input 检查",
        what="追踪图中的每个 ATen 算子都会写成 `.attn`; 没有降级规则的算子变成一个形状为 torch "
        "记录的形状的 `input`, 之后的一切照样检查, 但它本身如何计算不被检查.",
        why="悄悄跳过模块一部分的检查会让从未读过的代码通过.",
        example="# (Python) y = torch.special.bessel_j0(x)   # warning[SC602]",
        fix="用 shapecheck 认识的算子写这一步 (docs/torch.md 列出了它们), 或接受这个警告 "
        "(`--ignore SC602`).",
    ),
    "SC603": dict(
        summary="无法加载或构造 Python 目标",
        message="无法检查 `{target}`: {reason}",
        what="Python 目标 (`model.py:Class`, `model.py:make`) 在追踪前先被导入和构造; 导入失败、"
        "构造函数抛出异常, 或工厂函数没有返回 `(module, inputs)`, 都是这个诊断 (运行失败: 退出码 2).",
        why="其余文件照样检查和报告.",
        example="# shapecheck verify model.py:Missing\n# error[SC603]: 无法检查 `model.py:Missing`: ...",
        fix="给出一个模块类、一个接受其维度的工厂函数, 或一个无参数并返回 (module, inputs) 的工厂函数.",
    ),
    "SC610": dict(
        summary="模型的掩码让查询看到之后的键",
        message="这里构造的掩码作为 `{argument}` 传给 {layers}, 让查询 {query} 看到了它之后的键 "
        "{key}: {reason}",
        what="整个模型 (`verify model.py:make`) 只构造一次掩码, 再传给每个注意力层。每个层收到的掩码按"
        "该层的读法解读 (加性掩码的零; 布尔掩码的真或假项, 依层追踪得到的注意力如何使用它); 若它让某个"
        "查询看到其后的键, 且它是转置了的因果掩码 (恰好保留每个查询及其之后的键, 填充除外), 就在构造它的"
        "那一行报告。双向可见的前缀、窗口: 不下结论。",
        why="模型 forward 中构造错的因果掩码是它到达的每一层的错误: 模型用未来训练, 生成时却没有未来可看。",
        example="# (Python) mask = torch.triu(torch.ones(T, T, dtype=torch.bool))   # error[SC610]\n"
        "#          for block in self.blocks: x = block(x, mask)",
        fix="用 `torch.tril` 构造掩码 (每个查询保留不晚于它的键, `k <= q`), 并符合层读取它的极性。",
    ),
    "SC613": dict(
        summary="掩码或分数函数读取越过了轴的范围",
        message="`{function}` 在轴 {axis} 上以 {index} 读取 `{tensor}`, 而该轴有 {size} 个元素 "
        "(位置 0 到 {last}), 在 {at}: FlexAttention 在调用的每个位置都调用它",
        what="FlexAttention 在调用的每个样本、头、query 和 key 处调用 `mask_mod` (以及 `score_mod`)。"
        "函数以仅由位置算出的索引读取的张量 (`document_ids[h, q_idx]`, `bias[q_idx - kv_idx + 31]`) "
        "在该索引取到的每个值处被读取; 在调用时的尺寸上求值追踪得到的函数, 越过轴 (或小于 `-size`) "
        "的值在函数的 `return` 行报告, 并在读取所在的行附注。依赖从张量读出的值的索引 "
        "(`offsets[document_id[q_idx]]`) 不作判断, `-size` 到 `-1` 的索引也不 (eager PyTorch 从末尾读取)。",
        why="eager 时调用因索引错误而失败; 编译后 kernel 不加检查地读取张量之外的内存, 掩码或分数就是"
        "那里碰巧的内容: 错误的索引 (本应是样本处用了头) 在尺寸碰巧合适时一声不响地运行。",
        example="# (Python) def mask_mod(b, h, q_idx, kv_idx):\n"
        "#              return document_ids[h, q_idx] == document_ids[h, kv_idx]   # error[SC613]\n"
        "#          flex_attention(q, k, v, block_mask=create_block_mask(mask_mod, B, None, T, T))",
        fix="按轴所计数的位置读取 (`document_ids[b, q_idx]`: id 按样本区分), 或在位置超出表时限定索引 "
        "(`clamp`)。",
    ),
    "SC612": dict(
        summary="有缓存的 key 时, 模型从 0 开始给新 token 编号",
        message="这里编号的位置作为旋转表到达 {layers}, 把第一个新 token 当作位置 0 旋转, 而它前面缓存了 "
        "{cached} 个 key: 每个新 token 都被当作位于缓存之中来旋转",
        what="在解码或分块预填充的一步, 整个模型的各层把新的 key 放在缓存的 key 之后 (沿 key 轴拼接), "
        "并用模型由位置算出的表旋转它们。表按层收到的样子读取: 第一个新 token 那一行全为 0 的正弦表 "
        "(复数表: 全为实数) 就是位置 0。当层的缓存中有 key 时, 在给位置编号的 `arange` (表由它算出) "
        "处报告; 由调用者传给模型的位置、在层内按索引读取的全部位置的表、由多个 `arange` 算出的表: "
        "不下结论。",
        why="旋转位置编码让每个分数依赖 query 与 key 之间的距离; 重新从 0 编号时, 新 token 得到最先缓存"
        "的那些 token 的角度, 与缓存的每个距离都是错的。模型照常运行, 形状一致; 生成在第一个 token 之后"
        "偏离 (忽略缓存的 `position_ids = torch.arange(T)`)。",
        example="# (Python) pos = torch.arange(T)   # error[SC612]\n"
        "#          freqs = pos[:, None] * self.inv_freq; cos, sin = ...\n"
        "#          for i, block in enumerate(self.blocks): x = block(x, cos, sin, cache[i])",
        fix="在缓存之后给新 token 编号: `torch.arange(past_len, past_len + T)`, `past_len` 是缓存的 key 数。",
    ),
    "SC611": dict(
        summary="模型的掩码让某个查询无键可看",
        message="这里构造的掩码作为 `{argument}` 传给 {layers}, 让查询 {query} 没有可关注的键: {reason}",
        what="整个模型的掩码按 SC610 的方式解读。若掩码在没有填充的情况下让某个查询无键可看, 就在构造它的"
        "那一行报告: 它隐藏了每个查询自己的键 (缺了对角线的因果掩码: 第一个查询什么也看不到), 或它对每个"
        "序列的每个查询隐藏了所有键 (反了的填充掩码: 模型的输入中没有全是填充的序列)。",
        why="没有键的一行是对空集的 softmax: 用 `-inf` 得到 NaN, 用很大的负数则是对被隐藏的键的均匀平均, "
        "在掩码到达的每一层都是如此。",
        example="# (Python) mask = torch.tril(torch.ones(T, T, dtype=torch.bool), diagonal=-1)"
        "   # error[SC611]\n"
        "#          for block in self.blocks: x = block(x, mask)",
        fix="保留每个查询自己的键 (`torch.tril(ones)`, `k <= q`), 并让填充掩码隐藏的是填充: 注意力掩码为 0 "
        "的键。",
    ),
    "SC001": dict(
        summary="语句无法解析",
        message="{detail}",
        what="解析器读不懂这条语句。每条出错的语句只报一个错误; 文件的其余部分照常检查。",
        why="无法解析的语句没有含义; 它本应定义的张量被当作形状未知, 不再引出更多错误。",
        example="S = Q @ \n# error[SC001]: `@` 之后应当是一个表达式",
        fix="按信息所说补全或改正这条语句。",
    ),
    "SC002": dict(
        summary="文件不是 UTF-8 文本",
        message="文件不是有效的 UTF-8 文本 (偏移 {offset} 处的字节 0x{byte:02x})",
        what="spec 文件是 UTF-8 文本, 而这个文件含有不是 UTF-8 的字节。",
        why="无法解码的 spec 读不可靠; 猜测编码可能悄悄改变名字。",
        example="(一个以 Latin-1 保存、注释中含有 `é` 的文件)",
        fix="把文件另存为 UTF-8。",
    ),
    "SC003": dict(
        summary="超出了检查器的某项上限",
        message="{detail}",
        what="这条语句超出了检查器的某项上限: 嵌套超过 {depth} 层, 整数字面量超过 {digits} 位, "
        "维度表达式中的指数大于 {exponent}, 或者证明会超出代数预算 (\"太复杂, 无法证明\"): "
        "代入派生维度和约束之后, 维度表达式展开超过 {terms} 项、次数超过 {degree}、"
        "数字超过 {bits} 位 (二进制), 或展开需要超过 {work} 次项的乘法; "
        "或者把约束组合起来需要超过 {steps} 步。".format(
            depth=200, digits=40, exponent=64, terms="256", degree=256, bits="8,192",
            work="4,096", steps="4,000"),
        why="这样的输入几乎总是误生成的, 检查它可能耗尽时间或内存。预算按项数和步数计算, "
        "从不按秒计算, 所以在每台机器上、每个编辑器里结论都相同。",
        example="dim N\ndim M = N ** 100000\n# error[SC003]: 指数 100000 太大",
        fix="按信息所说简化表达式或约束 (把关系写成定义, `constraint D == H * d`), "
        "拆成几条语句, 或者用 `--dim` 绑定一些维度。",
    ),
    "SC004": dict(
        summary="错误太多, 检查器停止了",
        message="错误太多; 在 {count} 个之后停止",
        what="这个文件产生的诊断超过了报告上限。",
        why="几百个错误之后, 其余的几乎总是同一个错误的后果, 全部打印只会淹没最前面的几个。",
        example="(把一个二进制文件当作 spec 传入)",
        fix="先改正显示出来的错误, 再运行一次检查。",
    ),
    "SC005": dict(
        summary="不可见字符或双向控制字符",
        message="不可见字符 {character} {where}",
        what="spec 中有一个显示为空、或者改变周围文字显示方式的字符: 零宽空格或连接符、软连字符、"
        "双向控制字符 (从右到左覆盖、隔离、标记)、单词连接符、文件中间的字节顺序标记, "
        "或其他 Unicode 格式字符。无论它在哪里都会报告, 注释和字符串也不例外。名字中不能含有"
        "这样的字符 (它既不是字母也不是数字), 所以在名字中它同时也是语法错误。",
        why="spec 看起来必须就是它本来的样子: 注释中的双向覆盖字符可以让编辑器或代码审查显示的"
        "顺序与实际检查的顺序不同 (\"Trojan Source\"), 零宽字符会让两个看起来相同的名字"
        "实际上不同。",
        example="dim N\ninput X: [N]  # the scores\u200b of one head\noutput X\n"
        "# warning[SC005]: 不可见字符 U+200B ZERO WIDTH SPACE 在注释中",
        fix="删除这个字符 (修复正是这样做的)。",
    ),
    "SC006": dict(
        summary="检查这个文件时 shapecheck 内部出错",
        message="检查 {path} 时内部出错: {error} (这是 shapecheck 的 bug; "
        "设置 SHAPECHECK_DEBUG=1 可以看到回溯)",
        what="shapecheck 自己在检查这个文件时出错: 这是 shapecheck 的 bug, 不是 spec 的错误。"
        "其他文件照常检查和报告。",
        why="一个触发 bug 的文件不应让其他所有文件的结果丢失, 无论哪种输出格式; 退出状态是 2, "
        "和任何内部错误一样。",
        example="(任何让检查器出错的文件; 设置 SHAPECHECK_DEBUG=1 可以看到回溯)",
        fix="把这个文件报告给 shapecheck 的开发者; 在此之前, 简化触发它的语句。",
    ),
    "SC007": dict(
        summary="命令行上给出的路径无法读取",
        message="无法读取 {path}: {reason}",
        what="要检查的文件或文件夹不存在, 或者无法读取、无法列出。",
        why="无法读取的 spec 没有被验证; 其他路径照常检查和报告, 退出状态是 2。",
        example="(shapecheck verify missing.attn)",
        fix="改正路径, 或者让文件可读。",
    ),
    "SC008": dict(
        summary="文件不是 spec",
        message="这个文件看起来不是 spec: {counted} (第一条, 第 {line} 行: {first})",
        what="文件中几乎没有能解析为 spec 语言语句的内容: 至少十条语句, 且至少五分之四, "
        "是语法错误。这只报告一次, 而不是每行一个 SC001。",
        why="误把 Markdown 页面、Python 模块或配置文件当作 spec 时, 否则成百上千的错误会淹没"
        "唯一有用的事实 (这不是 spec)。",
        example="(shapecheck verify README.md)",
        fix="检查 `.attn` spec 文件 (文件夹指其下的 `*.attn` 文件); 若是用别的语言写的 spec, "
        "从显示的第一个错误改起。",
    ),
    "SC101": dict(
        summary="名字在声明之前就被使用",
        message="`{name}` 没有定义",
        what="这个名字既不是已声明的维度, 也不是文件中前面定义过的张量。",
        why="一切都要先声明再使用, 这样每个形状在需要时都是已知的。最常见的原因是拼写错误。",
        example="dim N, d\ninput Q: [N, d]\nS = Q @ K.T\n# error[SC101]: `K` 没有定义",
        fix="声明这个名字 (`input K: [N, d]`), 或改正拼写。",
    ),
    "SC102": dict(
        summary="一个名字被定义了两次",
        message="`{name}` 已经定义过了",
        what="维度只定义一次, 一个名字不能既是维度又是张量, `input`/`param` 也只声明一次。"
        "张量可以像 Python 那样重新绑定 (`att = att.masked_fill(...)`): 那是它的新版本。",
        why="维度是整个 spec 的事实, 对每个语句都成立; 两次声明同一个输入则说不清运行时给的是哪一个。",
        example="dim N, d\ninput X: [N, d]\ninput X: [N, N]\n# error[SC102]: `X` 已经定义过了",
        fix="给新的值起一个自己的名字 (`X2`)。",
    ),
    "SC103": dict(
        summary="维度被当作张量用, 或张量被当作维度用",
        message="`{name}` 是 {actual}, 但这里需要 {expected}",
        what="形状和维度表达式由维度构成; 值由张量构成 (维度在值中当作标量)。张量不能出现在形状里。",
        why="形状中的每一项必须是计算开始前就已知的正整数; 张量是数据。",
        example="dim N\ninput X: [N, N]\ninput Y: [X, N]\n# error[SC103]: `X` 是张量, 但这里需要维度",
        fix="使用一个维度 (用 `dim` 声明)。",
    ),
    "SC104": dict(
        summary="保留字或内置函数被用作名字",
        message="`{name}` 是{what_kind}, 不能用作名字",
        what="保留字 (`bool`、`inf`、`row` ……) 不能用作名字; 内置函数名 (`softmax`、`exp` ……) "
        "不能命名维度。张量可以取内置函数的名字 (`cos`、`sin`), 从那里起遮蔽该内置函数, "
        "就像 Python 一样; 语句关键字 (`output`、`input` ……) 在不能当关键字读的地方就是名字。",
        why="维度名出现在每个形状里, 与内置函数同名会让读者误解。",
        example="dim exp\n# error[SC104]: `exp` 是内置函数, 不能用作名字",
        fix="换一个名字。",
    ),
    "SC105": dict(
        summary="调用了不是内置函数的东西",
        message="`{name}` 不是内置函数",
        what="只能调用语言参考中列出的内置函数。",
        why="检查器必须知道每个运算的形状规则。",
        example="dim N\ninput X: [N, N]\nY = softmaxx(X)\n# error[SC105]: `softmaxx` 不是内置函数",
        fix="使用某个内置函数; help 行会给出最接近的名字。",
    ),
    "SC106": dict(
        summary="草稿中未声明的名字已被推断",
        message="没有声明, 所以根据用法推断: {names}",
        what="草稿是什么都不声明 (没有 `dim`、`input` 或 `param`) 的规格, 就像学习笔记那样写公式。"
        "其中每个未声明的名字都得到让每条语句都正确的最一般的声明: 用在需要尺寸的位置的名字是维度, "
        "其余的是输入; 除非公式要求两个维度相等, 否则它们互不相同; 秩取公式所需的最小值。"
        "help 行就是这些声明, 可以直接粘贴到文件开头。",
        why="这样按笔记的写法写出的公式也能验证、运行并生成报告, 而且 shapecheck 做了哪些假设都会说出来, "
        "不会默默进行。在声明了任何东西的规格里, 未声明的名字仍然是错误 (SC101): 拼写错误不能变成新的输入。",
        example="S = Q @ K.T; P = softmax(S, axis=row); O = P @ V\n"
        "# note[SC106]: 没有声明, 所以根据用法推断: `Q`, `K`, `V`\n"
        "# help: dim N, d, M, e\n# help: input Q: [N, d]\n# help: input K: [M, d]\n"
        "# help: input V: [M, e]",
        fix="不需要修改。粘贴这些声明可以把它们写明 (之后文件按严格模式检查); "
        "`--no-infer` 则把未声明的名字报告为错误。",
    ),
    "SC201": dict(
        summary="维度表达式可能不是正整数",
        message="{expr} 并非对每个允许的尺寸都是正整数{reason}",
        what="形状中的每一整项, 以及维度定义的每一边, 在满足约束的每一种自由维度取值下都必须是正整数。",
        why="像 `[N - 1]` 这样的形状在 `N = 1` 时是空的; \"验证通过\" 必须对所有尺寸成立。",
        example="dim N\ninput X: [N - 1]\n# error[SC201]: N - 1 并非对每个允许的尺寸都是正整数",
        fix="加一条使它为正的约束, 绑定这个维度, 或修改表达式。",
    ),
    "SC202": dict(
        summary="无法证明整除",
        message="{claim}",
        what="维度表达式中的 `/` (以及 `reshape` 中的 `-1`) 是整除; 检查器必须证明除法没有余数。"
        "(`split_heads` 用 SC313 说同一件事。)",
        why="只有 `H` 整除 `D_model` 时, `D_model / H` 才是一个尺寸; 没有约束时, "
        "总有某些允许的尺寸会失败。",
        example="dim D_model, H\ndim d = D_model / H\n"
        "# error[SC202]: D_model 并非对所有尺寸都能被 H 整除: 在 D_model=1, H=2 时不成立: "
        "1 不能被 2 整除\n# help: 加上 `dim k` 和 `constraint D_model == H * k`",
        fix="按 help 声明这个关系: `dim k` 和 `constraint D_model == H * k`。",
    ),
    "SC203": dict(
        summary="绑定违反了约束",
        message="约束 {constraint} 不成立: {reason}",
        what="具体尺寸 (来自 `--dim` 或 `dim T = 128`) 必须满足每一条约束。",
        why="破坏已声明关系的绑定描述的是另一个模型。",
        example="dim N, d, H\ndim D = 500\nconstraint D == H * d\n# 使用 --dim H=8 --dim d=64\n"
        "# error[SC203]: 约束 D == H*d 不成立: 500 != 512 (D=500, H=8, d=64)",
        fix="修改绑定; 如果模型确实不同, 就修改约束。",
    ),
    "SC204": dict(
        summary="`--dim` 绑定与定义矛盾",
        message="{detail}",
        what="用 `--dim` 绑定派生维度或固定维度时, 值必须与它的定义一致。",
        why="与定义不一致的绑定无法满足。",
        example="dim N, d, H\ndim D = H * d\n# 使用 --dim H=8 --dim d=64 --dim D=500\n"
        "# error[SC204]: `--dim D=500` 与它的定义 D = H*d = 512 矛盾",
        fix="绑定 spec 声明过的维度, 值为正整数。",
    ),
    "SC205": dict(
        summary="约束平凡成立",
        message="约束 {constraint} 平凡成立",
        what="两边本来就可证明相等的约束没有增加任何信息。",
        why="这通常说明约束写错了维度。",
        example="dim N\nconstraint N == N\n# warning[SC205]: 约束 N == N 平凡成立",
        fix="删掉它, 或写出你真正想表达的关系。",
    ),
    "SC206": dict(
        summary="需要维度表达式的地方出现了别的东西",
        message="维度表达式中不允许出现{what_found}",
        what="维度表达式由整数、维度、`+ - * / // **` 和括号构成。",
        why="形状必须只由尺寸就能算出来。",
        example="dim N\ninput X: [N * 0.5]\n# error[SC206]: 维度表达式中不允许出现数字 0.5",
        fix="只用整数和维度来写这个尺寸。",
    ),
    "SC207": dict(
        summary="`--dim` 绑定了 spec 没有声明的维度",
        message="`--dim {name}={value}` 绑定了 `{name}`, 但这个 spec 没有声明它",
        what="命令行绑定了文件中没有声明的维度。多个文件时, 一个绑定只作用于声明了该维度的文件。",
        why="这通常是拼写错误 (把 `N` 写成 `--dim n=128`); 这样的绑定不起作用。",
        example="dim N\n# 使用 --dim n=128\n# warning[SC207]",
        fix="绑定 spec 声明过的维度 (名字区分大小写)。",
    ),
    "SC301": dict(
        summary="`@` 的内维不一致",
        message="`@` 的内维{relation}: {lhs_inner} ({lhs_shape} 的最后一轴) 对 "
        "{rhs_inner} ({rhs_shape} 的倒数第二轴)",
        what="`A @ B` 把 `A` 的最后一轴与 `B` 的倒数第二轴收缩; 这两个尺寸必须可证明相等。",
        why="这正是笔记 30 秒自检的第一条: `QKᵀ` 的\"内维\"必须一致 (都是 `d`)。"
        "`Q, K: [N, d]` 时写 `Q @ K` 会把 `d` 和 `N` 配在一起, 对大多数尺寸都是错的。",
        example="dim N, d\ninput Q: [N, d]\ninput K: [N, d]\nS = Q @ K\n"
        "# error[SC301]: `@` 的内维不一致: d ([N, d] 的最后一轴) 对 N (……)\n"
        "# help: 你是不是想写 `Q @ K.T`?",
        fix="把右操作数转置 (`K.T`), 或加上使两个尺寸相等的约束。",
    ),
    "SC302": dict(
        summary="`@` 的操作数是标量",
        message="`@` 需要秩至少为 1 的张量, 但{side}操作数是标量",
        what="矩阵乘只对向量和矩阵 (及其批) 有定义, 与 NumPy 的 `matmul` 相同。",
        why="`x @ 2` 在 NumPy 中也是错误; 缩放要写成 `*`。",
        example="dim N, d\ninput Q: [N, d]\nS = Q @ d\n# error[SC302]",
        fix="用 `*` 缩放, 或者乘以一个张量。",
    ),
    "SC303": dict(
        summary="操作数无法广播",
        message="形状 {lhs_shape} 和 {rhs_shape} 在 `{op}` 中无法广播: {lhs_dim} 和 {rhs_dim} {relation}",
        what="逐元素运算、矩阵乘的批轴和 `where` 按 NumPy 的规则广播: 从右对齐, "
        "两个尺寸可证明相等或其中之一是字面量 1 时才匹配。",
        why="只在某些尺寸下为 1 的维度, 在这些尺寸下能广播, 在其余尺寸下会失败。",
        example="dim N, d\ninput A: [N, d]\ninput B: [d, N]\nC = A + B\n# error[SC303]",
        fix="转置其中一个操作数, 或用 `reshape` 插入一个大小为 1 的轴。",
    ),
    "SC304": dict(
        summary="声明的形状与算出的形状不符",
        message="`{name}` 的形状是 {actual}, 但{where}写的是 {declared}",
        what="带形状注解的定义 (`S: [N, N] = ...`)、`assert`, 或带形状的 `output`, "
        "都会把这个形状与算出的形状逐项比对。",
        why="注解是 spec 自己的断言; 笔记 30 秒自检的第二条: 输出形状必须是 `N×d` (或 `N×D_model`)。",
        example="dim N, d\ninput Q: [N, d]\ninput K: [N, d]\nS: [N, d] = Q @ K.T\n"
        "# error[SC304]: `S` 的形状是 [N, N], 但它的注解写的是 [N, d]",
        fix="改正计算; 如果注解写错了, 就改正注解。",
    ),
    "SC305": dict(
        summary="轴超出范围",
        message="轴 {axis} 超出了秩为 {rank} 的张量 ({shape}) 的范围",
        what="`axis=` 取 `-rank .. rank-1` 之间的整数, 或者 `row` (最后一轴) 或 `col` (倒数第二轴)。",
        why="NumPy 遇到这样的轴会报错; `col` 要求秩至少为 2。",
        example="dim N\ninput x: [N]\ny = softmax(x, axis=col)\n# error[SC305]",
        fix="使用张量具有的轴。",
    ),
    "SC306": dict(
        summary="运算需要不同的秩",
        message="{operation} 需要{requirement}, 但 {operand} 的形状是 {shape}",
        what="有些运算需要最小的秩: `.T` 和 `merge_heads` 分别至少 2 / 3 个轴, `split_heads` 至少 2 个。",
        why="`.T` 交换最后两个轴, 而向量没有两个轴。",
        example="dim N\ninput x: [N]\ny = x.T\n# error[SC306]: `.T` 需要至少 2 个轴, 但 x 的形状是 [N]",
        fix="先 reshape 这个张量, 或者去掉转置。",
    ),
    "SC307": dict(
        summary="reshape 改变了元素个数",
        message="从 {source} 到 {target} 的 reshape {relation}: {source_count} 个元素对 {target_count}",
        what="`reshape` 保持元素不变; 新旧形状的乘积必须可证明相等 (`-1` 这一项由整除推出)。",
        why="在多头注意力中, `[N, D_model] -> [N, H, d]` 只有在 `D_model == H * d` 时才成立, "
        "这正是笔记的关键等式。",
        example="dim N, d, H, D_model\ninput X: [N, D_model]\nY = reshape(X, [N, H, d])\n"
        "# error[SC307] …… help: 加上 `constraint D_model == H * d`",
        fix="用约束声明这个关系, 或改正目标形状。",
    ),
    "SC308": dict(
        summary="转置的排列无效",
        message="{perm} 不是轴 0..{last} 的一个排列",
        what="`transpose(x, [p0, p1, ...])` 中每个轴的下标恰好出现一次。",
        why="NumPy 遇到重复或缺少的轴会报错。",
        example="dim N, d\ninput x: [N, d]\ny = transpose(x, [0, 0])\n# error[SC308]",
        fix="每个轴列出一次。",
    ),
    "SC309": dict(
        summary="张量无法拼接",
        message="{detail}",
        what="`concat([a, b, ...], axis=k)` 需要秩相同的张量, 除轴 `k` 外各轴的尺寸都一致; "
        "`stack([a, b, ...], axis=k)` 需要形状完全相同。",
        why="与 `np.concatenate` 和 `np.stack` 相同。",
        example="dim N, d\ninput a: [N, d]\ninput b: [d, d]\nc = concat([a, b], axis=-1)\n# error[SC309]",
        fix="转置或 reshape, 使其他轴一致。",
    ),
    "SC310": dict(
        summary="einsum 无效",
        message="{detail}",
        what="`einsum(\"subscripts\", ...)` 遵循 NumPy: 每个操作数一项, 每个轴一个字母 (或 `...`), "
        "重复的字母只有一个尺寸, 输出的字母都出现在输入中。",
        why="下标版是笔记中 \"永远不会错\" 的写法; 检查器对它的要求与矩阵乘相同。",
        example="dim N, d\ninput Q: [N, d]\ninput K: [N, d]\nS = einsum(\"ij,ji->ij\", Q, K)\n# error[SC310]",
        fix="改正下标, 使每个字母只对应一个尺寸。",
    ),
    "SC311": dict(
        summary="`where` 的条件不是 bool",
        message="{detail}",
        what="`where(c, a, b)` 的条件是 `bool` (language.md 第 6 节): 一个掩码。",
        why="实数条件在非零处都为真, 这很少是掩码想表达的意思。",
        example="dim N\ninput S: [N, N]\ninput M: [N, N]\nP = where(M, S, -inf)\n# error[SC311]",
        fix="把掩码声明为 `bool[...]` (或用 `causal_mask` 构造)。",
    ),
    "SC312": dict(
        summary="内置函数的参数不对",
        message="{detail}",
        what="每个内置函数接受固定的位置参数和关键字 (见语言参考)。",
        why="否则拼错的关键字或缺少的参数会被悄悄忽略。",
        example="dim N\ninput x: [N, N]\ny = softmax(x, axes=row)\n# error[SC312]: `softmax` 没有关键字 `axes`",
        fix="按文档调用内置函数。",
    ),
    "SC313": dict(
        summary="split_heads 无法拆分最后一轴",
        message="无法把 {shape} 的最后一轴 {last} 拆成 {heads} 个 head: {reason}",
        what="`split_heads(x, H)` 把 `[..., N, H*d]` 变成 `[..., H, N, d]`; 最后一轴必须可证明能被 `H` 整除。",
        why="`D_model` 和 `H` 没有关系时, `D_model / H` 并非对每种取值都是一个尺寸。",
        example="dim N, H, D_model\ninput X: [N, D_model]\nQ = split_heads(X, H)\n# error[SC313]: ... "
        "在 D_model=1, H=2 时不成立: 1 不能被 2 整除",
        fix="按 help 加上这个关系: `dim k` 和 `constraint D_model == H * k`。",
    ),
    "SC314": dict(
        summary="需要张量, 却给了标量或列表",
        message="{detail}",
        what="需要值 (张量, 或者数字、维度这样的标量) 的地方出现了列表、字符串或轴名。"
        "列表是内置函数的参数 (`reshape`、`concat`、`ones` ……), 字符串是 `einsum` 的下标, "
        "`row` / `col` 是轴。",
        why="它们都没有形状, 由它们算出的东西都无法检查。",
        example="dim N\ninput X: [N]\nY = X + [N]\n# error[SC314]: 列表不是张量",
        fix="使用张量 (`ones([N])` 可以构造一个常量张量), 或把列表传给接受它的内置函数。",
    ),
    "SC315": dict(
        summary="不允许的指数",
        message="{detail}",
        what="在维度表达式中, `**` 需要非负整数指数。",
        why="`N ** 0.5` 不是整数尺寸。",
        example="dim N\ninput x: [N ** 0.5]\n# error[SC315]",
        fix="使用整数指数。",
    ),
    "SC316": dict(
        summary="下标可能落在轴的范围之外",
        message="下标 `{index}` 在轴 {axis} ({shape}) 上{relation}{where}: 它必须{bound}",
        what="整数下标 `x[i]` 沿长度为 `n` 的轴取出一个元素; 对每种允许的尺寸, 它都必须在 "
        "`-n .. n-1` 之内 (负下标从末尾数起)。",
        why="NumPy 遇到这样的下标会抛出 `IndexError`, 但只在越界的那些尺寸下: `x[1]` 在 "
        "`N >= 2` 时可以, `N = 1` 时出错。",
        example="dim N, d\ninput x: [N, d]\ny = x[1]\n# error[SC316]: 下标 `1` 在轴 0 "
        "([N, d]) 上可能越界: 它必须小于 N\n# help: 加上 `constraint N >= 2`",
        fix="加上 help 行给出的约束, 或者使用轴内的下标。",
    ),
    "SC317": dict(
        summary="切片的边界可能落在轴的范围之外",
        message="切片 `{slice}` 的{part} `{bound}` {relation} (轴 {axis}, {shape}, 长度 {size})"
        "{where}; NumPy 会悄悄把它截断",
        what="对每种允许的尺寸, 切片的边界都必须在轴内 (`0 .. n`, 或从末尾数起的 `-n .. -1`): "
        "长度为 `d` 的轴上的 `x[..., :h]` 需要 `h <= d`。",
        why="边界超出末尾时 NumPy 会一声不响地截断, 于是 `x[..., :h]` 悄悄返回少于 `h` 列, "
        "之后的每个形状都会错。",
        example="dim N, d, h\ninput x: [N, d]\ny = x[:, :h]\n# error[SC317]: 切片 `:h` 的终点 "
        "`h` 可能超出轴的末尾 (轴 1, [N, d], 长度 d); NumPy 会悄悄把它截断\n"
        "# help: 加上 `constraint h <= d`",
        fix="声明这个关系 (`constraint h <= d`, 一半一半时用 `dim d = 2 * h`), 或者在轴内切片。",
    ),
    "SC318": dict(
        summary="切片可能一个元素也取不到",
        message="轴 {axis} ({shape}) 上的切片 `{slice}` {relation}空的{where}: 它的长度是 {length}",
        what="切片得到的轴有 `(stop - start) / step` 个元素 (向上取整); 和每个尺寸一样, "
        "对每种允许的尺寸它都必须是正整数。",
        why="维度是正整数; `T = 1` 时长度为 `T` 的轴上的 `x[1:]` 是空的, `d = 1` 时 "
        "`x[..., :d//2]` 也是空的。",
        example="dim T, d\ninput x: [T, d]\ny = x[1:]\n# error[SC318]: 轴 0 ([T, d]) 上的切片 "
        "`1:` 可能是空的: 它的长度是 T - 1\n# help: 加上 `constraint T >= 2`",
        fix="加上 help 行给出的约束 (`constraint T >= 2`), 或者修改边界。",
    ),
    "SC319": dict(
        summary="下标涉及的轴比张量的轴还多",
        message="{detail}",
        what="`x[...]` 中每个整数下标和每个切片占用一个轴 (`None` 增加一个轴, `...` 代表剩下的轴, "
        "最多出现一次)。",
        why="NumPy 会抛出 `IndexError: too many indices`。",
        example="dim N, d\ninput x: [N, d]\ny = x[0, 0, 0]\n# error[SC319]: 下标太多: "
        "[N, d] 是 2 维的, 但用了 3 个下标",
        fix="下标的个数不要超过张量的轴数。",
    ),
    "SC320": dict(
        summary="下标或切片无法检查",
        message="{detail}",
        what="下标或切片边界是符号已知的维度表达式 (整数、维度、`+ - * //`), 步长是非零的维度表达式。"
        "只有存放整数的张量 (`int[...]`, 即收集: `E[ids]`) 才能做下标, 且其余各项必须是整条轴; "
        "掩码或实数张量不能做下标。",
        why="`x[mask]` 的形状取决于 `mask` 的值, 因此无法检查 (收集的形状就是下标的形状, 与值无关); "
        "实数不是位置; 而 `x[i]` 是从开头还是从末尾数起, 取决于 `i` 的符号。",
        example="dim N\ninput x: [N]\ninput m: bool[N]\ny = x[m]\n# error[SC320]: `m` 是掩码 "
        "(bool[N]): 用掩码做下标时结果的形状取决于它的值",
        fix="用 `where(m, x, 0)` 施加掩码, 把位置声明为 `int[...]`, 或使用符号已知的下标 (声明 help 行给出的约束)。",
    ),
    "SC321": dict(
        summary="逻辑运算用在了不是 bool 的张量上",
        message="`{op}` 需要 bool 操作数, 但 `{operand}` 的形状是 {shape}",
        what="`&`、`|` 和 `~` 是 bool 张量 (掩码, 比如比较的结果) 上的逻辑与、或、非。",
        why="NumPy 拒绝对实数做 `&`。原因往往是优先级: `&` 比比较运算结合得更紧, "
        "所以 `i >= j & i < n` 读作 `i >= (j & i) < n`。",
        example="dim N\ninput x: [N]\ny = x & (x > 0)\n# error[SC321]",
        fix="先做比较 (`x > 0`), 并把每个比较放进括号: `(i >= j) & (i < n)`。",
    ),
    "SC322": dict(
        summary="值的元素类型不对",
        message="{detail}",
        what="张量存放实数、`bool`、`int` (位置、id、桶) 或 `complex` 复数。收集的位置是 `int`; "
        "`view_as_real`、`imag` 和 `conj` 需要复数; `view_as_complex`、`polar` 和实函数需要实数。",
        why="用实数做收集, 或对实数张量取实数视图, 是转写的错误: NumPy 和 PyTorch 要到运行时才会拒绝。",
        example="dim V, D, N\ninput E: [V, D]\ninput pos: [N]\ny = take(E, pos, axis=0)\n"
        "# error[SC322]",
        fix="把位置声明为 `int[...]` (或用 `arange` 构造), 把复数声明为 `complex[...]` "
        "(或用 `view_as_complex`、`polar` 得到)。",
    ),
    "SC323": dict(
        summary="最后一个轴无法配成复数",
        message="{detail}",
        what="`view_as_complex(x)` 把 `x` 大小为 2 的最后一个轴读作 (实部, 虚部); "
        "`as_complex(x)` 把最后一个轴 (大小为偶数) 的相邻元素配对。",
        why="复数形式的旋转位置编码 (Meta 的 Llama) 把每个头的特征配对; 奇数宽度会把一个特征与下一个头的特征配在一起。",
        example="dim N\ninput x: [N, 3]\nz = view_as_complex(x)\n# error[SC323]",
        fix="先把最后一个轴变成成对的形式, `reshape(x, [N, -1, 2])`, 且宽度为偶数 (声明为 `dim d = 2 * h`)。",
    ),
    "SC401": dict(
        summary="声明的 input、param 或 dim 从未使用",
        message="{kind} `{name}` 已声明但从未使用",
        what="没有任何地方引用的 input、param 或 dim。",
        why="这通常是忘了某一步 (`W_O` 从未用上), 或者是过时的名字。",
        example="dim N, d\ninput X: [N, d]\nparam W_O: [d, d]\noutput X\n"
        "# warning[SC401]: param `W_O` 已声明但从未使用",
        fix="用上它, 或删掉这个声明。",
    ),
    "SC402": dict(
        summary="softmax 权重沿一个没有归一化的轴求和",
        message="`{contraction}` 沿{summed}对 softmax 权重求和, 但 softmax 是沿{normalised}"
        "归一化的: {consequence}",
        what="softmax 让权重沿一个轴的和为 1: 在注意力中, 是每个 query 对所有 key 的权重。"
        "用这些权重读出 V 的缩并 (`@` 或 `einsum`) 必须沿同一个轴求和。轴会穿过转置、置换、"
        "`einsum` 字母、`repeat`、`dropout`、掩码和 reshape 被追踪, 与布局无关: 检查的是"
        "它是哪一个轴, 而不是它的大小或位置。",
        why="自注意力的分数表是方阵, 所以沿错误的轴做 softmax 或写成 `P.T @ V` 时每个形状都对, "
        "而每个输出行却变成了对 query 的求和, 不再是 V 的加权平均。",
        example="dim N, d\ninput Q: [N, d]\ninput K: [N, d]\ninput V: [N, d]\n"
        "P = softmax(Q @ K.T / sqrt(d), axis=row)\nO = P.T @ V\n# warning[SC402]",
        fix="沿缩并求和的那个轴归一化: `softmax(S, axis=row)` 配 `P @ V`; 或者分数布局为 "
        "[key, query] 时, `softmax(S, axis=col)` 配 `P.T @ V`。",
    ),
    "SC403": dict(
        summary="bool 张量被当作数字使用",
        message="`{operand}` 是 bool; {operation} 把它当作 0 和 1",
        what="算术运算、`@`、`einsum` 和逐元素函数像 NumPy 一样接受 bool 张量, 把 true 读作 1, "
        "false 读作 0。形状照常检查。",
        why="bool 张量几乎总是掩码, 把掩码加到分数上只会让分数整体偏移 1, 而不是去掉被掩盖的位置。",
        example="dim N\ninput S: [N, N]\ninput M: bool[N, N]\nP = softmax(S + M)\n# warning[SC403]",
        fix="用 `where(M, S, -inf)` 施加掩码。",
    ),
    "SC404": dict(
        summary="注意力分数的缩放大小不对",
        message="`{scores}` 的缩放是 `{written}`, 但它沿 {size}{where} 求和: {reason}",
        what="分数 `QKᵀ` 要乘以 1/sqrt(d), d 是乘积求和的那个轴的大小 (每个头的维度)。缩放无论"
        "写在哪里都会被收集: `/ sqrt(X)`、`* (1 / sqrt(X))`、`/ X ** 0.5`、`* X ** -0.5`, "
        "写在乘积上或写在乘积之前的因子上 (`(Q / sqrt(d)) @ K.T`); X 在约束下与那个大小比较, "
        "对所有尺寸成立 (`--dim` 绑定让它们碰巧相等也不会消除警告)。数值常数 (`* 0.125`) "
        "或数值倍数 (`sqrt(3 * d)`) 不作判断。",
        why="按模型宽度而不是头的宽度缩放 (`sqrt(D_model)`, 而乘积沿 `d` 求和; 只有 H = 1 "
        "时两者才相等) 或按序列长度缩放, 会悄悄改变 softmax 的温度: 训练往往掩盖了它。",
        example="dim N, d\ninput Q: [N, d]\ninput K: [N, d]\ninput V: [N, d]\n"
        "S = Q @ K.T / sqrt(N)\nO = softmax(S) @ V\n# warning[SC404]",
        fix="按缩并轴的大小缩放: `/ sqrt(d)`。缩放写成一个 `/ sqrt(X)` 时, `verify --fix` "
        "会做这个修改; 其他写法 (`* X ** -0.5`, 分在 Q 和 K 上) 没有唯一可改的位置, Python 目标"
        "是源代码: 这时帮助只是文字。",
    ),
    "SC405": dict(
        summary="注意力分数没有缩放",
        message="`{scores}` 进入 softmax 之前没有缩放; 通常的缩放是 1/sqrt({size}), "
        "即它求和的那个轴的大小",
        what="注意力的分数没有经过任何缩放就进入了 softmax。",
        why="d 维向量的点积大约按 sqrt(d) 增长, 会让 softmax 饱和。有些模型有意不缩放 "
        "(笔记的一行公式也没写), 所以这只是一个提示。",
        example="dim N, d\ninput Q: [N, d]\ninput K: [N, d]\ninput V: [N, d]\n"
        "O = softmax(Q @ K.T) @ V\n# note[SC405]",
        fix="除以 `sqrt(d)`; 如果模型有意不缩放, 就保持原样。",
    ),
    "SC406": dict(
        summary="softmax 权重在求和之前被改动了",
        message="`{change}` 在 `{contraction}` 求和之前改动了 softmax 权重: 它们的每一行之和"
        "不再是 1",
        what="在 softmax 和与 V 的缩并之间, 权重被掩盖、缩放、平移或以别的方式改动了 "
        "(`dropout` 和移动轴没有问题)。用分数在 softmax 之前已经用过的同一个掩码再掩盖一次"
        "也没有问题。",
        why="softmax 之后再施加掩码, 每一行的和小于 1: 输出不再是 V 的加权平均。`run` 会在"
        "数值上显示出来。",
        example="dim N, d\ninput Q: [N, d]\ninput K: [N, d]\ninput V: [N, d]\n"
        "P = softmax(Q @ K.T / sqrt(d))\nPm = where(causal_mask(N), P, 0)\nO = Pm @ V\n"
        "# warning[SC406]",
        fix="在 softmax 之前掩盖分数: `softmax(where(mask, S, -inf))`; 偏置同样加在 softmax "
        "之前的分数上: `softmax(S + bias)`。",
    ),
    "SC407": dict(
        summary="因果掩码被转置了",
        message="`{where}` 中的因果掩码被转置了: 它的行对上了 `{contraction}` 的 key, 列对上了 "
        "query, 所以每个 query 看到的是它之后的 key (未来), 而不是之前的",
        what="`causal_mask(N)` 在第 i 行第 j 列 (j <= i) 为 true: 它的行必须是 query "
        "(`P @ V` 保留的权重轴), 列必须是 key (被求和的轴)。轴穿过每一次转置被追踪, 与布局无关。",
        why="分数表是方阵时, 转置的掩码让每个形状都对, 却让每个 query 看到了未来: 因果模型"
        "不再因果。",
        example="dim N, d\ninput Q: [N, d]\ninput K: [N, d]\ninput V: [N, d]\n"
        "S = where(causal_mask(N).T, Q @ K.T / sqrt(d), -inf)\nO = softmax(S) @ V\n"
        "# warning[SC407]",
        fix="按 `causal_mask` 构造的方向使用掩码: `where(causal_mask(N), S, -inf)`。",
    ),
    "SC408": dict(
        summary="因果掩码遮住了它允许的位置",
        message="`{where}` 遮住了因果掩码为 true 的位置 (query 可以看的位置): {sees}",
        what="`causal_mask(N)` 在 query 可以看的位置为 true。`where(mask, -inf, S)` (或加上 "
        "`where(mask, -inf, 0)`) 恰好把 `-inf` 放在这些位置上。",
        why="这样注意力只看到它不该看的: 未来; 或者 (掩码再被转置时) 只看到严格的过去, "
        "第一个 query 一个 key 也没有 (NaN 行)。",
        example="dim N, d\ninput Q: [N, d]\ninput K: [N, d]\ninput V: [N, d]\n"
        "S = where(causal_mask(N), -inf, Q @ K.T / sqrt(d))\nO = softmax(S) @ V\n"
        "# warning[SC408]",
        fix="交换两个分支: `where(mask, S, -inf)` 在掩码为 true 处保留分数。",
    ),
    "SC409": dict(
        summary="归约后的张量沿错误的轴广播",
        message="`{reduction}` 去掉了 `{x}` 的一个轴, 但在 `{expr}` 中它剩下的轴 ({size}) 对上了 "
        "`{other}` 的另一个轴: 每个元素都和别的行的结果组合在一起",
        what="没有 `keepdims=true` 的归约会去掉那个轴, 而广播从右边对齐形状: `sum(E, axis=-1)` "
        "按 `E` 的行编号, 但 `E / sum(E, axis=-1)` 用它去除每一列。分数表是方阵时形状依然一致。",
        why="这样手写的 softmax 并没有把每一行归一化。",
        example="dim N\ninput S: [N, N]\nE = exp(S)\nP = E / sum(E, axis=-1)\n# warning[SC409]",
        fix="保留被归约的轴: `sum(E, axis=-1, keepdims=true)`。",
    ),
    "SC410": dict(
        summary="被掩盖的分数填入了 softmax 遮不住的值",
        message="`{where}` 把被掩盖的分数填成 {fill}: softmax 仍然给被掩盖的 key 实在的权重",
        what="在 softmax 之前施加到分数上的掩码必须填 `-inf` (或者一个很负的数, 如 `-1e9`), "
        "这样 softmax 给这些 key 的权重才是 0。",
        why="`where(mask, S, 0)` 让被掩盖的 key 相对其他 key 仍有 exp(0) 的权重: 掩码并没有"
        "遮住它们。",
        example="dim N, d\ninput Q: [N, d]\ninput K: [N, d]\ninput V: [N, d]\n"
        "S = where(causal_mask(N), Q @ K.T / sqrt(d), 0)\nO = softmax(S) @ V\n# warning[SC410]",
        fix="填入 `-inf`: `where(mask, S, -inf)`。",
    ),
    "SC411": dict(
        summary="reshape 需要移动一个轴",
        message="从 {source} 到 {target} 的 reshape 保持元素顺序, 所以并不移动轴 {size}: "
        "结果中的轴 {size} 跑遍的是别的轴",
        what="`reshape` 从不移动轴: 它按顺序 (C 顺序) 读取元素。当目标在另一个位置上有一个与源轴"
        "同样大小的轴时, 结果中的这个轴并不是那个轴: `[H, N, d]` -> `[N, H*d]` 得到的行混合了"
        "头和 token。",
        why="这正是 `merge_heads` 漏掉的那次转置: 形状一致, 头却被打乱了。",
        example="dim N, d, H\ninput O: [H, N, d]\nY = reshape(O, [N, H * d])\n# warning[SC411]",
        fix="先移动轴 (`transpose(O, [1, 0, 2])`), 或使用会移动轴的 `merge_heads` / `split_heads`。",
    ),
    "SC412": dict(
        summary="分数上的掩码沿 query 变化, 而不是沿 key",
        message="`{where}` 沿 key ({key_size}) 是常量, 沿 query ({size}) 变化: 它掩盖或平移的是"
        "分数的整行, 任何 query 在 key 之间的选择都没有改变",
        what="padding 掩码说明哪些 key 可以被看, 所以它必须沿分数的 key 轴 (softmax 归一化、"
        "`P @ V` 求和的那个轴) 变化。按另一种方式广播 (在 `[B, H, N, M]` 的分数上用 "
        "`m[:, None, :, None]`, 而不是 `m[:, None, None, :]`) 时, 它在每一行上都是常量。",
        why="softmax 看不见加到整行上的数, 整行填成 `-inf` 则变成 NaN: 被 padding 的 key "
        "仍然被关注。N = M 时形状掩盖了这一点。",
        example="dim B, H, N, d\ninput Q: [B, H, N, d]\ninput K: [B, H, N, d]\n"
        "input V: [B, H, N, d]\ninput keep: bool[B, N]\n"
        "S = where(keep[:, None, :, None], Q @ K.T / sqrt(d), -inf)\nO = softmax(S) @ V\n"
        "# warning[SC412]",
        fix="把掩码的轴放在 key 上: `keep[:, None, None, :]`。",
    ),
    "SC413": dict(
        summary="位置变换被施加到了 V 上",
        message="`{values}` 在经过位置的旋转变换 (`{rotary}`) 之后被 `{contraction}` 求和: "
        "位置只通过分数, 也就是只通过 Q 和 K 进入注意力",
        what="旋转位置编码 (与 cos、sin 表的乘积加上 rotate-half, 或者交错的成对旋转) 让 query "
        "与 key 的点积依赖于它们的相对位置。施加到 V 上, 它旋转的是输出所平均的值。",
        why="于是每个输出按 key 的绝对位置混合特征, 旋转注意力从不这样做; 形状和数值看起来都"
        "合理, 但模型已不是所描述的那个。",
        example="dim N, h\ndim d = 2 * h\ninput Q: [N, d]\ninput K: [N, d]\n"
        "input V: [N, d]\ninput cos_t: [N, d]\ninput sin_t: [N, d]\n"
        "Vr = V * cos_t + concat([-V[:, h:], V[:, :h]], axis=-1) * sin_t\n"
        "O = softmax(Q @ K.T / sqrt(d)) @ Vr\n# warning[SC413]",
        fix="只旋转 Q 和 K; V 保持原样。",
    ),
    "SC414": dict(
        summary="key/value 的头为 query 分组被平铺了, 而不是重复",
        message="`{tiled}` 平铺了 {kv} 个 key/value 头 (头 j 服务 query 头 j, j + {kv}, ...), "
        "但 query 头按连续的块分组: 每个 query 头遇到的是另一组的 key",
        what="分组查询注意力让每个 key/value 头服务一组 G 个 query 头。`split_heads`、"
        "`repeat(x, G, axis=...)` (torch 的 `repeat_interleave`, Hugging Face 的 `repeat_kv`) "
        "把 kv 头 j 分给 query 头 jG ... jG + G - 1。在头前面并入一个副本轴, 或者把张量与自身"
        "拼接, 得到的却是平铺: j, j + Hkv, ...",
        why="形状一致, 模型照样运行, 但每个 query 头都用错了 key/value 头: 加载训练好的权重后"
        "输出是乱的。",
        example="dim B, N, d, Hkv, G\ninput Q: [B, Hkv * G, N, d]\ninput K: [B, Hkv, N, d]\n"
        "input V: [B, Hkv, N, d]\n"
        "Kt = reshape(repeat(K[:, None], G, axis=1), [B, G * Hkv, N, d])\n"
        "Vr = repeat(V, G, axis=1)\n"
        "O = softmax(Q @ Kt.T / sqrt(d)) @ Vr\n# warning[SC414]",
        fix="原地重复每个头: `repeat(K, G, axis=1)`。",
    ),
    "SC415": dict(
        summary="query 与 key 的各部分没有对齐",
        message="`{scores}` 对分段构造的特征求和, 但 `{query}` 中各部分的顺序是 {q_parts}, "
        "`{key}` 中是 {k_parts}: 每一部分遇到的是另一侧无关的部分",
        what="当 Q 和 K 各自由几部分拼接而成 (潜在注意力中不带位置的部分和旋转部分), 它们的"
        "乘积按位置逐个配对特征: 两侧各部分的顺序必须相同。",
        why="总宽度相同时形状一致; 分数却在对无关特征的乘积求和。",
        example="dim N, a, b, d\ninput qa: [N, a]; input qb: [N, b]\ninput ka: [N, a]; "
        "input kb: [N, b]\ninput V: [N, d]\nQ = concat([qa, qb], axis=-1)\n"
        "K = concat([kb, ka], axis=-1)\n"
        "O = softmax(Q @ K.T / sqrt(a + b)) @ V\n# warning[SC415]",
        fix="两侧按相同的顺序拼接各部分。",
    ),
    "SC416": dict(
        summary="由几部分拼成的掩码中, 因果块排在了每个 query 都能看见的 key 之前",
        message="`{concat}` 把因果块 `{block}` 放在了 `{visible}` 之前, 而后者是每个 query 都能"
        "看见的 key: 缓存的 key 在前、新的 key 在后时, 每个 query 都能看见它之后的所有新 key "
        "(未来)",
        what="KV 缓存的掩码沿 key 轴由两部分拼成: 缓存 key 的块 (全部可见: 全 1, 或加上的 0) "
        "和新 key 的因果块。key 中缓存在前 (`causal_mask(N, M)` 按右下角对齐), 所以因果块必须"
        "是最后一部分。",
        why="两部分颠倒时, 因果块对上的是缓存的 key, 而新的 key 全部可见: 解码的一步会关注"
        "它之后的 token。",
        example="dim N, M, d\ninput Q: [N, d]\ninput K: [M + N, d]\ninput V: [M + N, d]\n"
        "m = concat([tril(ones([N, N])), ones([N, M])], axis=-1)\n"
        "O = softmax(where(m == 1, Q @ K.T / sqrt(d), -inf)) @ V\n# warning[SC416]",
        fix="把缓存 key 的可见块放在前面: `concat([ones([N, M]), tril(ones([N, N]))], axis=-1)`。",
    ),
    "SC417": dict(
        summary="在含缓存的 key 上, 因果掩码按左上角对齐",
        message="`{where}` 把因果三角 `{mask}` 按左上角对齐, 但 key 比 query 多 {gap} 个 "
        "({keys} 个 key, {queries} 个 query): 缓存的 key 在前时, 第 i 个 query 位于 key 的位置 "
        "{gap} + i, 按左上角对齐它只能看到前 i + 1 个 key, 看不到它之前的任何新 key",
        what="在解码或分块预填充的一步, key 是缓存的 key 接着新的 key (拼接、写入缓存: "
        "N_k = P + N_q)。query 轴是输出保留的那个轴; 第 i 个 query 就是位置 P + i 的 key, "
        "所以因果三角必须按右下角对齐: `tril(ones([N_q, N_k]), P)`、`causal_mask(N_q, N_k)`。",
        why="按左上角对齐 (`tril(ones([N_q, N_k]))`) 时, 第 i 个 query 只看到 key 0..i: "
        "缓存的开头。每个 query 都丢掉了紧挨在它之前的 token 和它自己; 单个 token 的解码步"
        "只看到第一个缓存的 token (executorch#22426, flash-attention#1778)。",
        example="dim N, P, d\ninput Q: [N, d]\ninput K: [P + N, d]\ninput V: [P + N, d]\n"
        "m = tril(ones([N, P + N])) > 0\n"
        "O = softmax(where(m, Q @ K.T / sqrt(d), -inf)) @ V\n# warning[SC417]",
        fix="按右下角对齐三角, 对角线移动缓存的长度: `tril(ones([N, P + N]), P)` "
        "(PyTorch: `torch.tril(..., diagonal=P)`)。",
    ),
    "SC418": dict(
        summary="旋转变换只施加在 query 或 key 一侧, 而不是两侧",
        message="`{rotary}` 按位置旋转了 {rotated}, 但 `{scores}` 把它与未旋转的 {plain} "
        "`{operand}` 相乘: 分数依赖 {rotated} 的绝对位置, 而不是 query 与 key 之间的距离",
        what="旋转位置编码把每个 query 按它的位置 i 旋转, 把每个 key 按它的位置 j 旋转; "
        "它们的点积于是只依赖 i - j。分数的两侧都必须用同样的表旋转。仅当未旋转的一侧与"
        "旋转的一侧是同一个张量的投影时才检查 (自注意力: `X @ Wq.T`、`X @ Wk.T`), 可以经过"
        "移动、拆分成头或重复; 从缓存或其他来源读取的 key 不作判断。",
        why="只旋转一侧会在每个分数里留下另一侧无法抵消的位置: 模型照常运行, 位置行为却是"
        "错的 (例如 `q, _ = apply_rotary_pos_emb(q, k, cos, sin)` 丢掉了旋转后的 key)。",
        example="dim N, D, h\ndim d = 2 * h\ninput X: [N, D]\nparam Wq: [d, D]\nparam Wk: [d, D]\n"
        "input V: [N, d]\ninput cos_t: [N, d]\ninput sin_t: [N, d]\nQ = X @ Wq.T\nK = X @ Wk.T\n"
        "Qr = Q * cos_t + concat([-Q[:, h:], Q[:, :h]], axis=-1) * sin_t\n"
        "O = softmax(Qr @ K.T / sqrt(d)) @ V\n# warning[SC418]",
        fix="用与 query 相同的表旋转 key: `Kr = K * cos_t + rotate_half(K) * sin_t`, 并在分数中使用 `Kr`。",
    ),
    "SC419": dict(
        summary="key 和 value 按不同的顺序拼接",
        message="value `{values}` 沿 key 轴按 {v_parts} 的顺序拼接, key `{keys}` 按 {k_parts} "
        "的顺序: 第 j 个 key 的权重读取的是另一个位置的 value",
        what="权重把第 j 个 key 与第 j 个 value 配对: 当 K 和 V 都沿 key 轴由几部分 (缓存的 key "
        "和新的 key) 拼成时, 两侧各部分的顺序必须相同。仅当两侧各部分的大小相同、只是顺序"
        "不同时才检查。",
        why="形状一致, 输出也是真实 value 的加权和, 只是位置错了: 缓存的 value 被用新 key "
        "的权重读取。",
        example="dim N, P, d\ninput Q: [N, d]\ninput k: [N, d]\ninput v: [N, d]\n"
        "input Kc: [P, d]\ninput Vc: [P, d]\nK = concat([Kc, k], axis=0)\n"
        "V = concat([v, Vc], axis=0)\nO = softmax(Q @ K.T / sqrt(d)) @ V\n# warning[SC419]",
        fix="按 key 的顺序拼接 value: `concat([Vc, v], axis=0)`。",
    ),
    "SC420": dict(
        summary="新的 key 被旋转到它前面的缓存已占用的位置",
        message="`{positions}` 从 {start} 开始给新 token 编号, 但 `{keys}` 中它们前面有 {cached} 个 "
        "key: 新的 key 被当作位于缓存之中而不是之后来旋转",
        what="旋转位置编码把位置 j 上的 key 旋转 j 对应的角度。在解码或分块预填充的一步, key 是缓存"
        "的 key 接着新的 key (沿 key 轴拼接): 新 token 位于位置 P, ..., P + N - 1, P 是缓存的 key 数。"
        "仅当位置在规约中构造 (`arange`, 加上偏移)、变成旋转表 (角度、`cos`、`sin`), 并且它们旋转的 "
        "key 沿 key 轴拼接在其他 key 之后时才检查; 作为输入的位置 (`position_ids`) 或按索引从表中读取的"
        "位置: 不下结论。",
        why="重新从 0 编号时, 每个新 key (以及同样旋转的 query) 得到的是旧位置的角度: 新 query 与缓存的"
        "每个分数都依赖错误的距离。形状一致, 模型照常运行; 生成在第一个 token 之后偏离 (忽略 "
        "`past_key_values_length` 的 `position_ids = arange(T)`)。",
        example='dim N, P, h\ndim d = 2 * h\ninput X: [N, d]\nparam Wk: [d, d]\ninput Q: [N, d]\ninput Kc: [P, d]\ninput V: [P + N, d]\nparam inv_freq: [h]\npos = arange(N)\nangles = concat([pos[:, None] * inv_freq, pos[:, None] * inv_freq], axis=-1)\nk = X @ Wk.T\nkr = k * cos(angles) + concat([-k[:, h:], k[:, :h]], axis=-1) * sin(angles)\nK = concat([Kc, kr], axis=0)\nO = softmax(Q @ K.T / sqrt(d)) @ V\n# warning[SC420]',
        fix="在缓存之后给新 token 编号: `arange(P, P + N)` (PyTorch: "
        "`torch.arange(past_len, past_len + T)`, `past_len` 是缓存的 key 数)。",
    ),
    "SC350": dict(
        summary="位置函数的调用参数不对",
        message="`{name}` 接受 {count} 个位置参数, 给了 {given} 个",
        what="用 `def` 定义的函数 (docs/language.md §10) 每个参数对应一个位置参数; 调用处换成它的函数体。",
        why="缺少参数的值, 函数体就没有意义。",
        example="dim N\ndef causal(q, k) = k <= q\ni = arange(N)[:, None]\nm = causal(i)\n"
        "# error[SC350]: `causal` 接受 2 个位置参数, 给了 1 个",
        fix="每个参数传一个实参。",
    ),
    "SC351": dict(
        summary="`flex_attention` 的调用参数不对",
        message="`flex_attention(Q, K, V, mask=f, score=g, scale=c)` 接受三个张量名, 以及按关键字"
        "给出的、用 `def` 定义的函数和缩放",
        what="`flex_attention` 是用位置函数写出的 PyTorch FlexAttention (docs/language.md §10): "
        "按名字给出 query、key 和 value, `mask=` (或 `mask_mod=`、`block_mask=`) 是掩码函数, "
        "`score=` (或 `score_mod=`) 是分数变换, `scale=` 是缩放。",
        why="这个调用代表它计算的注意力; 每一部分都必须能写出来。",
        example="dim N, d\ninput Q: [N, d]\nO = flex_attention(Q, Q)\n"
        "# error[SC351]: `flex_attention(Q, K, V, mask=f, score=g, scale=c)` 接受三个张量名, "
        "以及按关键字给出的、用 `def` 定义的函数和缩放",
        fix="写出 Q、K 和 V 的名字, 并传入用 `def` 定义的函数。",
    ),
    "SC430": dict(
        summary="关于掩码或分数函数的断言不成立",
        message="`{name}` 不是{claim}: {reason}",
        what="`assert f: causal, window(W), every_row, reads_keys(pad), keeps_masked` 陈述位置函数"
        "的性质 (docs/language.md §10.2); 每条都在所有允许的大小和位置上证明, 这一条在所示的大小上不成立。",
        why="差一个比较、一个偏移或一个符号的掩码运行时不会报错, 却关注了错误的 key。",
        example="dim N, M\ndef causal(q, k) = k <= q + M - N + 1\nassert causal(N, M): causal\n"
        "# warning[SC430]: `causal` 不是因果的: 在 M=1, N=2 时, query 0 看见了 key 0, 它在自己的位置 -1 之后",
        fix="改正反例指出的比较或偏移。",
    ),
    "SC431": dict(
        summary="关于掩码的断言无法判定",
        message="无法判定 `{name}` 是否{claim}: {reason}",
        what="证明只读位置和维度的线性比较; 取余、维度之积或输入的值会让断言超出它的能力。"
        "在小尺寸上也没有找到反例, 所以这条断言既未被证明也未被推翻。",
        why="工具无法判定的断言就如实报告, 从不猜测。",
        example="dim N\ndef f(q, k) = k * k <= q * q\nassert f(N, N): causal\n"
        "# note[SC431]: 无法判定 `f` 是否因果的: 它读取了 k**2 <= q**2 (无法线性证明); "
        "请绑定维度 (`--dim`) 或陈述约束",
        fix="绑定维度, 或陈述能判定它的约束。",
    ),
    "SC432": dict(
        summary="掩码违反了规格陈述的约定",
        message="`{name}` {what}, 违反了 `{convention}` 陈述的约定",
        what="规格可以陈述公式看不出的东西 (docs/language.md §10.3): 输入掩码的哪个值保留 key "
        "(`input pad: bool[B, N] keep` 或 `drop`), 以及宽度为 W 的窗口是否包含距离为 W 的 key "
        "(`dim W window inclusive`) 或不包含 (`dim W window exclusive`), 相对位置的方向 "
        "(`rel: int[N, N] key_minus_query = ...`), 以及缓存在 key 中的位置 "
        "(`input k_cache: [B, P, d] cache_first`)。违反所陈述约定的掩码或相对位置会被"
        "标出; 没有陈述时什么也不报。",
        why="这类错误运行时不报错: 读反了的 padding 掩码只关注 padding, 差一的窗口多看一个 key。",
        example="dim N\ninput pad: bool[N] keep\ndef f(q, k) = (k <= q) & ~pad[k]\n"
        "# warning[SC432]: `f` 隐藏了 `pad` 为真的 key, 违反了 `input pad: bool[N] keep` 陈述的约定",
        fix="按约定读取掩码, 或陈述它实际遵循的约定。",
    ),
    "SC433": dict(
        summary="掩码对某个 query 隐藏了所有 key",
        message="`{name}` 在 {sizes} 时对 query {query} 隐藏了所有 key: 它的 softmax 行在 eager softmax "
        "中是 NaN, 在 SDPA 和 FlexAttention 中是无声的零",
        what="`flex_attention` 应用的掩码在所有允许的大小上检查: 没有可见 key 的 query 行没有有意义的输出。",
        why="这一行的输出是 NaN 或零, 取决于内核, 而且不报错。",
        example="dim N, M, d\ninput Q: [N, d]\ninput K: [M, d]\ninput V: [M, d]\n"
        "def causal(q, k) = k <= q + M - N\nO = flex_attention(Q, K, V, mask=causal)\n"
        "# warning[SC433]: `causal` 在 M=1, N=2 时对 query 0 隐藏了所有 key: 它的 softmax 行在 eager "
        "softmax 中是 NaN, 在 SDPA 和 FlexAttention 中是无声的零",
        fix="陈述排除它的约束 (`constraint N <= M`), 或让每个 query 看见自己的 key。",
    ),
    "SC435": dict(
        summary="位置函数把一个值和它自己比较或组合",
        message="`{comparison}` 两边都是 `{side}`: 结果总是 {value}",
        what="在掩码或分数函数 (`def`, 追踪得到的 `mask_mod` 或 `score_mod`) 中, 两边是同一个表达式的比较"
        "不依赖位置: `==`, `<=`, `>=` 总是真, `!=`, `<`, `>` 总是假; 一个表达式和它自己的 `|` 或 `&` "
        "就是这个表达式, 另一边什么也没读。其中一边本应读取另一个位置 "
        "(key 处的文档 id, `ids[b, kv_idx]`; key 处的全局 token 标记, `is_global[kv_idx]`)。",
        why="这个条件保留或丢弃其余条件留下的每一对: 文档掩码保留了之前所有的文档, 填充掩码什么也不隐藏, "
        "而且不报错。",
        example="dim N\ninput ids: int[N]\ndef same_document(q, k) = ids[q] == ids[q]\n"
        "# warning[SC435]: `ids[q] == ids[q]` 两边都是 `ids[q]`: 结果总是 真",
        fix="让一边读取另一个位置: `ids[q] == ids[k]`。",
    ),
    "SC436": dict(
        summary="掩码函数中 `|` 的一边永远不为真",
        message="`{part}` 是 `{name}` 中 `|` 的一边, 无论位置、大小和输入取什么值都永远不为真: 这个 `|` "
        "什么也没加",
        what="在掩码函数 (`def`, 追踪得到的 `mask_mod`) 中, `|` 的一边在范围内的任何位置、任何允许的大小、"
        "它读取的整数输入的任何值下都不为真 (每个元素是一个未知整数, 同一元素读两次是同一个值): "
        "`(k >= iv[p]) & (k < iv[p])`, 从一个值到它自己的区间。掩码就是另一边本身。",
        why="这一边本应放行的 key 永远看不到: 续写永远读不到的共享提示, 没有 query 能到达的全局 token, "
        "而且不报错。",
        example="dim N\ninput iv: int[N]\ndef m(q, k) = (k <= q) | (k >= iv[q]) & (k < iv[q])\n"
        "# warning[SC436]: `(k >= iv[q]) & (k < iv[q])` 是 `m` 中 `|` 的一边, 永远不为真",
        fix="读取区间的另一端: `(k >= iv[q]) & (k < iv[q + 1])`。",
    ),
    "SC434": dict(
        summary="断言没有指向函数或已知的性质",
        message="{problem}",
        what="`assert f: ...` 指向上面用 `def` 定义的函数, 以及 docs/language.md §10.2 的性质: "
        "`causal`、`window(W)`、`every_row`、`reads_keys(x)`、`same_as(f)`、`keeps_masked`、`decays`。",
        why="无法检查的断言会悄悄通过。",
        example="dim N\ndef f(q, k) = k <= q\nassert f: upper\n"
        "# error[SC434]: `upper` 不是性质; 请用 `causal`, `decays`, `every_row`, `keeps_masked`, "
        "`reads_keys(x)`, `same_as(f)`, `window(W)` 之一",
        fix="指向一个函数和其中一个性质。",
    ),
    "SC340": dict(
        summary="张量无法拆成所要求的几部分",
        message="无法把 {shape} 的轴 {axis} 拆成 {parts}: {reason}",
        what="`q, k, v = split(x, 3, axis=-1)` (NumPy: 3 个等分), `x.split(C, dim=2)` "
        "(PyTorch: 每部分大小为 C), `x.chunk(3)` 和 `x.unbind(0)` 给左边每个名字一部分; "
        "该轴必须可证明能等分成那么多份 (给定大小时, 必须等于名字个数乘以该大小)。",
        why="轴不能均分时, NumPy 和 PyTorch 会报错, 或者 PyTorch 返回的部分比左边的名字少或大小不等。",
        example="dim N, C\ninput x: [N, C]\nq, k, v = split(x, 3, axis=-1)\n# error[SC340]: "
        "无法把 [N, C] 的轴 C 拆成 3 个等分",
        fix="把该轴声明成倍数 (`[N, 3 * C]`), 或者加上 help 给出的约束。",
    ),
    "SC341": dict(
        summary="写入切片的值形状不对",
        message="无法把形状为 {shape} 的 `{value}` 写入形状为 {slice} 的 `{target}`: {reason}",
        what="`cache[:, P:P + S] = xk` 生成 `cache` 的一个新版本, 其中该切片换成 `xk`。"
        "切片的边界按下标的规则检查; 值的形状必须等于切片的形状, 或者能广播成它 (和 NumPy 一样)。",
        why="NumPy 会报 `could not broadcast input array from shape ...`; PyTorch 会报 `shape mismatch`。",
        example="dim B, T, S, d\nconstraint T >= S\ninput cache: [B, T, d]\ninput xk: [B, S + 1, d]\n"
        "cache[:, 0:S] = xk\n# error[SC341]: ... S 和 S + 1 不同",
        fix="写入与切片形状相同的值, 或者选出这个值所填的切片。",
    ),
    "SC501": dict(
        summary="`noqa` 注释没有屏蔽任何东西",
        message="`{directive}` {where}没有屏蔽任何东西",
        what="`# noqa` 注释 (或文件级的 `# shapecheck: noqa`) 点名的 warning 或 note 在它所在的"
        "地方并没有报告, 或者单独的 `# noqa` 所在之处什么也没有报告。",
        why="过时的屏蔽会藏住这条语句下一个真正的 warning; 去掉它, 屏蔽才可信, 就像 ruff 的 "
        "unused-noqa 规则。",
        example="dim N\ninput X: [N]\noutput Y = X * 2  # noqa: SC401\n"
        "# warning[SC501]: `# noqa: SC401` 在这条语句上没有屏蔽任何东西",
        fix="去掉这条注释, 或去掉不再适用的代码 (`verify --fix` 会去掉什么也没屏蔽的注释)。",
    ),
    "SC502": dict(
        summary="`noqa` 注释点名了一个 error",
        message="`{code}` 是 error, 而 error 不能被屏蔽",
        what="只有 warning 和 note 可以被屏蔽 (用 `# noqa`、`ignore` 或 `per-file-ignores`)。"
        "error 意味着 spec 对某些允许的大小形状不对: 它会保留, `run` 也会拒绝这个 spec。",
        why="被屏蔽的 error 会让一个无法运行的 spec 冒充已验证。",
        example="dim N, d\ninput Q: [N, d]\nS = Q @ Q  # noqa: SC301\n"
        "# warning[SC502]: `SC301` 是 error, 而 error 不能被屏蔽",
        fix="改正这个 error; 从注释中去掉这个代码。",
    ),
    "SC503": dict(
        summary="`noqa` 注释无法读懂",
        message="{detail}",
        what="`# noqa:` 后面必须跟代码, 例如 `SC402` (之间用逗号或空格分隔); shapecheck 没有的"
        "代码也会报告。",
        why="写错的屏蔽什么也屏蔽不了, 这很少是作者的本意。",
        example="dim N\ninput X: [N]  # noqa: SC999\noutput Y = X * 2\n"
        "# warning[SC503]: `SC999` 不是 shapecheck 的代码",
        fix="把代码写成 `# noqa: SC402, SC401`, 或者只写 `# noqa`。",
    ),
}

TORCH_HELPS = {
    "SC402": "在键上归一化: `softmax(scores, dim=-1)`, 再用 `weights @ v` 读取值 (不要对权重做 "
    "`.transpose(-2, -1)`)",
    "SC404": "按头宽缩放: `/ math.sqrt(head_dim)` (`k.size(-1)`), 而不是模型宽度",
    "SC406 add_before_softmax": "把偏置 (或加性掩码) 加在 softmax 之前的分数上: "
    "`scores = scores + bias`, 再做 `softmax(scores, dim=-1)`",
    "SC406 mask_before_softmax": "在 softmax 之前屏蔽分数: `scores.masked_fill(mask == 0, float('-inf'))`, 再做 `softmax`",
    "SC407": "按 `torch.tril` 构造的方式使用掩码, 行对应查询: 不要对掩码做 `.transpose(-2, -1)`",
    "SC408": "在掩码为 0 的位置填充: `masked_fill(mask == 0, float('-inf'))`",
    "SC402 drop_weights_transpose": "按 softmax 给出的样子用权重读取 value: `weights @ v`, 不要对权重做 `.transpose(-2, -1)`",
    "SC418": "保留调用返回的两个旋转结果: `q, k = apply_rotary_pos_emb(q, k, cos, sin)`, "
    "并在注意力中使用这个 `k` (以及原来的 `v`)",
    "SC420": "在缓存之后给新 token 编号: `torch.arange(past_len, past_len + T)`, `past_len` 是缓存的 "
    "key 数",
    "SC419": "像 key 一样拼接 value: 在 `torch.cat([past_k, k], dim=2)` 旁边写 "
    "`torch.cat([past_v, v], dim=2)`",
    "SC417": "按右下角对齐掩码: `torch.tril(..., diagonal=T_k - T)` (`T_k - T` 是缓存的 key)",
    "SC408 drop_negation": "去掉取反: 因果掩码 (`torch.tril`) 本身已经说明每个 query 可以看到哪些 key",
    "SC410": "用 `float('-inf')` 填充被屏蔽的分数",
    "SC411": "先用 `.permute(...)` 把各轴排好顺序再 `.view(...)`: `view` 只重组已按顺序相邻的轴"
    "(把头合并回去: `y.transpose(1, 2).contiguous().view(B, T, C)`)",
    "SC414 documented": "像文档字符串所说的那样就地重复每个 key/value 头: "
    "`torch.repeat_interleave(x, n_rep, dim={axis})`",
    "SC411 split_in_merge_order": "按 view 放置头的位置拆分, 再移动它们: "
    "`x.view(B, T, H, d).transpose(1, 2)`",
    "SC417 mask_mod": "在 `mask_mod` 中按缓存的 key 数偏移 query: `q_idx + offset >= kv_idx`, "
    "其中 `offset = k.shape[-2] - q.shape[-2]` (新 query 之前的 key 数)",
    "mask_mod": "`mask_mod` 在查询可以关注的位置返回 True: 比较时让查询的位置在较大的一侧 "
    "(`kv_idx <= q_idx`)",
    "SC610": "用 `torch.tril` 构造它: 每个查询保留不晚于它的键 (`k <= q`)",
    "SC610 shifted": "每个查询只保留不晚于它的键, 不含之后的键: `torch.tril` 中用 `diagonal=0` "
    "(被丢弃的键用 `torch.triu(..., diagonal=1)`)",
    "SC611 diagonal": "保留每个查询自己的键: `torch.tril(ones)` 保留 `k <= q` (`diagonal=0`; "
    "被丢弃的键用 `torch.triu(..., diagonal=1)`)",
    "spec": "在追踪得到的 spec 中: {help}",
    "traced_as": "追踪为 `{statement}`",
    "compared_here": "两边写在这里",
    "read_here": "读取写在这里",
    "past_at_other_sizes": "在追踪时的大小下在范围内 ({dim} = {traced}); 当 `{dim}` 为 {value} "
    "(模块同样接受的大小, spec 未限定 `{dim}`) 时越过该轴",
    "SC435": "让一边读取另一个位置 (`ids[b, kv_idx]` 对 `ids[b, q_idx]`)",
    "called_here": "做这件事的函数在这里被调用",
    "scale_set_here": "它所乘的缩放因子在这里设定",
    "confirmed": "已由 PyTorch 确认: 在 {sizes} 构建并调用该模块时, 它{detail}",
    "unconfirmed": "未确认: shapecheck 无法在 {sizes} 运行该模块来确认它 ({detail}); 以注释显示",
    "other_shape": "返回形状为 {actual} 的 `{name}`, 而追踪得到的 spec 说是 {expected}",
    "raises": "抛出 {error}",
    "no_shapes": "追踪得到的 spec 在那里没有给出输入的形状",
    "other_sizes": "其他大小",
    "data_sizes": "大小 {names} 由数据决定, 而不是由输入的形状决定, 因此无法在选定的大小上运行该模块",
    "not_rebuilt": "该模块无法在其他大小下重新构建: 它的工厂函数固定了大小",
    "transposed_product": "你是不是想写 `{product}`?",
}

NOTES = {
    "shadows_builtin": "从这里起 `{name}` 是一个张量, 不是内置函数 (它在这里定义)",
    "version": "`{name}` 在这里被写入; 这是它的新版本",
    "declared": "`{name}` 在这里声明为 {shape}",
    "operand": "`{text}` 的形状是 {shape}",
    "defined": "`{name}` 在这里定义为 {shape}",
    "dim_declared": "`{name}` 在这里声明",
    "first_defined": "`{name}` 第一次在这里定义",
    "declared_later": "`{name}` 在第一次使用之后才声明, 在这里",
    "defined_later": "`{name}` 在第一次使用之后才定义, 在这里",
    "inferred": "`{name}` 没有声明; 根据它的用法推断出形状 {shape}",
    "inferred_axis": "它的第 {axis} 维因为这里的用法而是 {size}",
    "inferred_axes": "它的第 {axes} 维因为这里的用法而是 {sizes}",
    "bound": "由 {source} 绑定",
    "equal_because": "{lhs} = {rhs}, 依据 {reason}",
    "softmax_here": "softmax 在这里对 `{argument}` 的轴 {axis} 归一化",
    "softmax_normalises": "对 `{argument}` 的 softmax 在这里把权重归一化",
    "scores_here": "`{scores}` 是 query 与 key 的乘积",
    "summed_here": "`{contraction}` 在这里对权重求和",
    "weights_summed": "`{contraction}` 在这里保留 query, 沿 key 求和",
    "padding_read": "`{input}` 与 key 一样长, 却只在 query 的位置读取: 它标记的 query 什么也看不到, "
    "而每个 query 仍然看得到它标记的 key",
    "mask_built": "掩码在这里由 `{mask}` 构造",
    "keys_after_cache": "旋转后的 key `{part}` 在这里接在另外 {cached} 个 key 之后",
    "mask_added": "`{mask}` 在这里加到分数上",
    "values_read_keys": "V 在这里读取 `{name}`, 即构造 key 所用的那个已旋转的张量",
    "query_parts_here": "query 在这里按此顺序拼接: {parts}",
    "key_parts_here": "key 在这里按此顺序拼接: {parts}",
    "reduced_here": "`{reduction}` 在这里去掉了它的轴",
    "capped_here": "`{cap}` 在这里对被掩盖的分数做了截断",
    "rotary_here": "旋转变换在这里施加",
    "unscaled_side": "`{operand}` 在这里没有得到缩放的任何一部分",
    "scale_defined": "`{name}` 在这里定义为 `{value}`",
    "unrotated_read": "另一侧在这里直接读取 `{name}`，而规约中有一个旋转变换会旋转它",
    "copies_here": "`{copies}` 在这里为每个 key/value 头做副本, 副本轴在头轴之前",
    "merged_here": "`{reshape}` 在这里按此顺序把 [{parts}] 合并为一个轴",
}

HELPS = {
    "not_a_spec": "shapecheck 检查 `.attn` spec: 文件夹指其下的 `*.attn` 文件",
    "spelling_instead": "请写成 `{spelling}`",
    "transpose": "你是不是想写 `{fix}`?",
    "transpose_scores": "分数是 `{scores}` (第 {line} 行): 是不是想在那里写 `{fix}`?",
    "redeclare": "如果 `{name}` 声明的形状错了: `{kind} {name}: {shape}`",
    "or": "或者: {text}",
    "add_constraint": "加上 `constraint {constraint}`",
    "add_dim_and_constraint": "加上 `dim {dims}` 和 `constraint {constraint}`",
    "did_you_mean": "你是不是想写 `{name}`?",
    "declare_it": "声明它: `{declaration}`",
    "declare_dim": "用 `dim {name}` 声明它",
    "use_row": "使用 `softmax({arg}, axis=row)`",
    "redeclare_bool": "把它声明为掩码: `{kind} {name}: {shape}`",
    "use_where": "把它声明为 `bool[...]`, 才能用作掩码",
    "apply_mask": "要施加掩码, 写成 `where({mask}, x, -inf)`",
    "bind_dim": "用 `--dim {name}=VALUE` 或 `dim {name} = VALUE` 绑定它",
    "rename": "给新的值起一个自己的名字, 例如 `{name}`",
    "compare_first": "先做比较, 例如 `({operand} > 0)`",
    "parenthesize_comparisons": "`&` 和 `|` 比比较运算结合得更紧: 把每个比较放进括号, "
    "`(a < b) & (c < d)`",
    "same_axis": "沿被求和的那个轴归一化: key 轴",
    "drop_weights_transpose": "按 softmax 给出的样子对权重求和, 去掉转置: `{product}`",
    "scale_by": "按缩并的大小缩放: `/ sqrt({size})`",
    "mask_before_softmax": "在 softmax 之前掩盖分数: `softmax(where(mask, S, -inf))`",
    "add_before_softmax": "把 `{term}` 加在 softmax 之前的分数上, 而不是加在它的权重上: "
    "`{call}`",
    "untranspose_mask": "按 `causal_mask` 构造的方向使用掩码 (行是 query), 去掉转置",
    "keep_diagonal": "让每个 query 看到它自己的 key: 用 `<=` 比较 (`j <= i`), 或保留带对角线的三角 "
    "(`tril(x)`, 而不是 `tril(x, -1)`)",
    "flip_comparison": "把比较反过来, 让 query 的位置在较大的一侧: `key <= query`",
    "swap_branches": "交换两个分支: `where(mask, S, -inf)`",
    "align_bottom_right": "按右下角对齐三角, 缓存的 key 在前: `{fixed}`",
    "drop_negation": "去掉取反 (`~`、`== 0`、`1 -`): 掩码本身已经是每个 query 可以看到的 key",
    "swap_branches_to": "交换两个分支: `{fixed}`",
    "fill_minus_inf": "填入 `-inf`: `where(mask, S, -inf)`",
    "keepdims": "保留被归约的轴: 给 `{reduction}` 加上 `keepdims=true`",
    "move_axes_first": "先用 `transpose` 移动轴, 或使用 `merge_heads` / `split_heads`",
    "split_in_merge_order": "按合并时的顺序 [{parts}] 拆分这个轴, 再用 `transpose` 移动轴 "
    "(或使用 `split_heads`)",
    "mask_keys": "沿 query 广播掩码, 让它的轴与 key 对齐",
    "self_comparison": "是不是想写 `{fixed}`?",
    "padding_keys": "在 key 的位置 (`{key_index}`) 读取 `{input}`; 如果填充的 query 也不应看到任何东西, "
    "再在 query 的位置读取它",
    "mask_after_cap": "先截断分数, 再掩盖: `where(mask, c * tanh(S / c), -inf)`",
    "same_part_order_kv": "按 key 的顺序拼接 value",
    "rotary_both_sides": "用同样的表旋转 query 和 key",
    "positions_after_cache": "在 {cached} 个缓存的 key 之后给新 token 编号: `{fixed}`",
    "rotary_qk_only": "只旋转 Q 和 K; V 按原样求和",
    "repeat_heads": "像 `repeat_kv` 那样在头自己的轴上原地重复每个 key/value 头: "
    "`repeat(K, G, axis=1)`",
    "same_part_order": "两侧按相同的顺序拼接各部分",
    "reorder_parts": "按这个顺序写出各部分: `{parts}`",
    "causal_block_last": "把缓存 key 的块放在前面, 因果块放在最后",
    "delete_invisible": "删除它",
    "remove_noqa": "去掉这条注释",
}

RELATIONS = {
    "differ": "不一致",
    "unproved": "无法证明相等",
    "refuted": "在 {values} 时不一致 ({left} 对 {right})",
    "differs_from": "不同于",
    "unproved_to": "无法证明等于",
    "refuted_to": "(在 {values} 时: {left} 对 {right}) 不同于",
}

SYNTAX_TEXT = {
    "expected_after": "{previous} 之后应当是 {expected}, 但遇到了 {found}",
    "expected_at_start": "应当是 {expected}, 但遇到了 {found}",
    "unexpected_char": "意外的字符 {char}",
    "unclosed": "`{bracket}` 没有闭合",
    "unmatched": "不匹配的 `{bracket}`",
    "unterminated_string": "字符串没有结束",
    "statement_start": "语句以 `dim`、`constraint`、`input`、`param`、`output`、`assert`、`def` "
    "或要定义的名字开头, 但遇到了 {found}",
    "nesting": "表达式嵌套太深 (括号或运算符超过 {limit} 层)",
    "literal_too_long": "整数字面量太长 (超过 {limit} 位)",
    "exponent_too_large": "指数 {value} 太大 (最多 {limit})",
    "dim_too_large": "维度值 {value} 太大 (最多 {limit})",
    "duplicate_keyword": "关键字 `{name}` 给了两次",
    "positional_after_keyword": "位置参数出现在关键字参数之后",
    "python_logic": "`{word}` 不是张量上的运算符 (NumPy 数组没有单一的真值); 请写 `{operator}`, "
    "并把比较放进括号",
    "convention_word": "`{word}` 在这里不是约定; 声明末尾可以写 {allowed}",
    "chained_comparison": "比较不能连写 (NumPy 数组不能写 `a < b < c`); `&` 和 `|` 比比较运算"
    "结合得更紧, 所以把每个比较放进括号: `(a < b) & (b < c)`",
}

CONSTRAINT_REASONS = {
    "values": "{lhs_value} {op_negated} {rhs_value} ({bindings})",
    "no_integer": "没有正整数 {name} 能让 {lhs_value} 等于 {rhs_value} ({bindings})",
}

DIVISIBILITY = {
    "unproved": "无法证明 {numerator} 能被 {denominator} 整除",
    "refuted": "{numerator} 并非对所有尺寸都能被 {denominator} 整除: 在 {values} 时不成立: "
    "{top} 不能被 {bottom} 整除",
    "different": "{numerator} 不能被 {denominator} 整除",
    "different_at": "{numerator} 不能被 {denominator} 整除: {top} / {bottom} 有余数",
}

DETAILS = {
    "sizes_relation": "{left} 和 {right} {relation}",
    "no_such_part": "{count} 个部分中没有第 {index} 部分 (编号从 0 开始)",
    "parts_of_size": "{count} 个大小为 {size} 的部分",
    "write_rank": "值有 {rank} 个轴, 切片有 {slice_rank} 个",
    "write_sizes": "切片的 {slice} 和值的 {value} {relation}",
    "cannot_unpack": "无法把它拆给 {count} 个名字: 元组赋值只接受 `split`, `chunk`, `unbind`, "
    "`max(dim)` 或者同样多个值组成的元组",
    "unpack_shape": "无法把 `{tensor}` 的形状 {shape} 拆给 {count} 个名字",
    "indices_unsupported": "`max(dim)` 的下标是整数, 这份规格无法保存: 请把它命名为 `_`",
    "equal_parts": "{count} 个等分",
    "noun_tensor": "张量",
    "noun_dim": "维度",
    "side_left": "左",
    "side_right": "右",
    "reserved_word": "保留字",
    "builtin_function": "内置函数",
    "not_positive_at_bindings": " (在绑定的尺寸下它不是正数)",
    "not_positive_at": ": 在 {values} 时它等于 {value}",
    "no_bindings": "这些值",
    "binding_contradicts_value": "`--dim {name}={bound}` 与 `dim {name} = {value}` 矛盾",
    "binding_contradicts_definition": "`--dim {name}={bound}` 与它的定义 "
    "{name} = {definition} = {value} 矛盾",
    "found_number": "数字 {text}",
    "found_call": "调用 `{name}(...)`",
    "found_string": "字符串",
    "found_list": "列表",
    "found_boolean": "布尔值",
    "found_expression": "这个表达式",
    "expression_too_large": "这个维度表达式太大, 无法检查",
    "invisible_in_comment": "在注释中",
    "invisible_in_string": "在字符串中",
    "invisible_in_code": "在代码中",
    "invisible_run": "(连续 {count} 个) {where}",
    "invisible_more": "(这个文件中还有 {count} 处不可见字符)",
    "rank_too_large": "秩 {rank} 超过了 NumPy 能容纳的 {limit} 个轴",
    "too_many_elements": "约 2^{power} 个元素超过了 NumPy 能索引的 2^{limit} 个 (float64)",
    "einsum_too_many_operands": "`einsum` 有 {count} 个操作数: NumPy 最多接受 {limit} 个",
    "too_complex_terms": "太复杂, 无法证明: 代入派生维度和约束之后, 这里的一个维度表达式展开"
    "超过 {limit} 项; 请简化它, 或者绑定它的一些维度 (`--dim N=...`)",
    "too_complex_work": "太复杂, 无法证明: 代入派生维度和约束之后, 展开这里的一个维度表达式"
    "要做超过 {limit} 次项的乘法; 请简化它, 或者绑定它的一些维度 (`--dim N=...`)",
    "too_complex_degree": "太复杂, 无法证明: 代入派生维度和约束之后, 这里的一个维度表达式的"
    "次数超过 {limit}; 请用更低的幂, 或者绑定它的一些维度 (`--dim N=...`)",
    "too_complex_bits": "太复杂, 无法证明: 代入派生维度、约束和绑定之后, 这里的一个数字超过 "
    "{limit} 位 (二进制); 请用更小的尺寸或幂",
    "too_complex_steps": "太复杂, 无法证明: 把不定义维度的约束组合起来需要超过 {limit} 步; "
    "请把它们写成定义 (一边只有一个维度, `constraint D == H * d`), 去掉不需要的, "
    "或者绑定一些维度 (`--dim N=...`)",
    "power_exponent": "维度表达式中 `**` 的指数必须是非负整数",
    "where_define": "它的注解",
    "where_assert": " assert ",
    "where_output": " output 声明",
    "op_batch_axes": "@ (批轴)",
    "op_einsum_ellipsis": "einsum `...`",
    "at_least_axes": "至少 {count} 个轴",
    "at_most_axes": "至多 {count} 个轴",
    "reshape_ambiguous": "有歧义",
    "reshape_many_inferred": "多于一个 `-1`",
    "concat_empty": "`{builtin}` 至少需要一个张量",
    "stack_shape": "第 {index} 个张量的形状是 {shape}, {relation}第一个张量 {first_shape}; "
    "`stack` 需要形状完全相同",
    "concat_rank": "第 {index} 个张量的形状是 {shape}, 秩为 {rank}, 但第一个张量的形状是 "
    "{first_shape}, 秩为 {first_rank}",
    "concat_axis": "第 {index} 个张量的形状是 {shape}, 在轴 {axis} 上{relation}第一个张量 "
    "{first_shape} ({size} 对 {first_size}); 只有轴 {free_axis} 可以不同",
    "einsum_invalid": "无效的下标 \"{subscripts}\": {reason}",
    "einsum_many_arrows": "多于一个 `->`",
    "einsum_term_count": "下标列出了 {terms} 个操作数, 但给了 {operands} 个",
    "einsum_stray_dot": "`{term}`: 一个不属于 `...` 的 `.`",
    "einsum_many_ellipses": "`{term}`: 每一项中 `...` 只能出现一次",
    "einsum_not_a_letter": "`{term}`: `{char}` 不是字母",
    "einsum_output_repeats": "输出 `{output}` 重复了一个字母",
    "einsum_rank": "第 {index} 个操作数的形状是 {shape} (秩 {rank}), 但它的下标 `{term}` "
    "列出了 {letters} 个轴",
    "einsum_unknown_output": "输出字母 `{letter}` 没有出现在任何输入中",
    "einsum_letter": "\"{subscripts}\" 中的字母 `{letter}` 在第 {index} 个操作数中是 {size}, "
    "{relation}第 {first} 个操作数中的 {previous}",
    "einsum_operand": "第 {index} 个操作数",
    "where_not_bool": "`where` 的条件必须是 bool, 但 `{text}` 的形状是 {shape}",
    "too_many_positional": "`{builtin}` 最多接受 {limit} 个位置参数, 但给了 {count} 个",
    "no_keyword": "`{builtin}` 没有关键字 `{name}`",
    "keyword_twice": "`{builtin}` 的 `{name}` 给了两次",
    "missing_argument": "`{builtin}` 缺少参数 `{name}`",
    "argument_kind": "`{builtin}` 的参数 `{param}` 必须是{kind}",
    "minus_one_outside_reshape": "`-1` 只能用在 `reshape` 中",
    "eps_not_positive": "`eps` 必须为正, 但得到 {eps}",
    "dropout_range": "dropout 概率必须在 [0, 1) 之内, 但得到 {p}",
    "axis_of": " `{tensor}` 的轴 {index} ({size}) ",
    "axis_from": " `{tensor}` 的轴 {index} ({size}, 来自 `{origin}`) ",
    "an_axis": "一个大小为 {size} 的轴",
    "sum_over_queries": "每个输出行变成了对 query (`{origin}` 的行) 的求和, 而不是 `{values}` "
    "的加权平均",
    "sum_over_batch": "每个输出变成了对批轴 {size} 的求和, 而不是 V 的加权平均",
    "normalised_over_queries": "每个输出行求和的权重是沿 query (`{origin}` 的行) 归一化的, "
    "而不是沿 key: 它们的和不是 1",
    "normalised_over_batch": "每个输出行求和的权重是沿批轴 {size} 归一化的, 而不是沿 key: "
    "它们的和不是 1",
    "sum_not_normalised": "它求和的权重加起来不是 1",
    "contracted_axis": " (`{operand}` 的轴 {index}, {shape})",
    "scale_differs": "{x} {relation} {size}",
    "scale_multiple": "{big} 是 {small} 的 {factor} 倍, 只有 {factor} = 1 时两者才相等",
    "scale_sized_multiple": "按声明的大小, {big} 是 {small} 的 {factor} 倍",
    "scale_inverted": "它乘以 sqrt({size}), 而不是除以它",
    "scale_one_side": "乘积只有一个因子被缩放了, 缩放为 {size} ** -0.25: 分数得到的是 "
    "{size} ** -0.25, 而不是 1/sqrt({size})",
    "scale_part": "{x} 只是 {size} 的一部分",
    "fill_squashed": "{fill}, 随后 `{cap}` 把它变成了一个有限的数",
    "scale_squared": "它除以 {size}, 而不是 sqrt({size})",
    "sees_future_only": "每个 query 只看到它之后的 key (未来)",
    "sees_past_only": "每个 query 只看到严格在它之前的 key, 第一个 query 一个也看不到",
    "loses_own_key": "每个 query 只看到严格在它自己之前的 key, 从不看到它自己的 key",
    "kind_tensor": "张量",
    "kind_tensors": "张量的列表",
    "kind_dim": "维度表达式",
    "kind_offset": "维度表达式 (正负均可)",
    "kind_shape": "形状 (维度表达式的列表)",
    "kind_axis": "轴 (整数、`row` 或 `col`)",
    "kind_perm": "轴下标的列表",
    "kind_string": "字符串",
    "kind_number": "数字",
    "kind_bool": "`true` 或 `false`",
    "list_not_a_tensor": "列表不是张量; 列表是 `reshape`、`concat`、`ones` …… 的参数",
    "string_not_a_tensor": "字符串只能用作 `einsum` 的下标",
    "axis_not_a_tensor": "`{name}` 只能用作轴 (`axis={name}`)",
    "not_a_value": "这不是一个值",
    "index_below_size": "小于 {size}",
    "at_sizes": " (在 {values} 时)",
    "index_at_least": "至少为 -{size}",
    "lies_outside": "越界",
    "may_lie_outside": "可能越界",
    "slice_past_end": "超出了轴的末尾",
    "slice_may_pass_end": "可能超出轴的末尾",
    "slice_before_start": "在轴的开头之前",
    "slice_may_precede_start": "可能在轴的开头之前",
    "slice_start": "起点",
    "slice_end": "终点",
    "is": "是",
    "may_be": "可能是",
    "too_many_indices": "下标太多: {shape} 是 {rank} 维的, 但用了 {count} 个下标",
    "many_ellipses": "一个下标中只能有一个 `...`",
    "tensor_index": "不支持用张量做下标: 结果的形状会取决于它的值",
    "sign_unknown": "无法判断 `{index}` 是从轴的开头还是末尾数起: 对某些尺寸它可能是负数, "
    "对另一些则不是",
    "step_zero": "切片的步长不能为零",
    "step_sign_unknown": "无法判断步长 `{step}` 是向前还是向后: 对某些尺寸它可能是负数, "
    "对另一些则不是",
    "bool_in_builtin": "这个内置函数",
    "bool_in_unary": "一元 `{op}`",
    "no_such_path": "没有这个文件或目录",
    "not_a_spec_count": "{total} 条语句中有 {broken} 条无法解析",
    "not_a_spec_stopped": "{broken} 条语句无法解析, 读到这里就停止了",
    "permission_denied": "没有权限",
    "noqa_on_statement": "在这条语句上",
    "noqa_in_file": "在这个文件中",
    "noqa_unknown_code": "`{code}` 不是 shapecheck 的代码",
    "noqa_no_codes": "`# noqa:` 后面必须跟代码, 例如 `# noqa: SC402`",
    # issue 21: element types, gathers, the new builtins
    "scatter_size": "下标 {index_shape} 与 x {shape} 在轴 {axis} 上不同 ({index_size} 对 {size}): `scatter` 要求下标除轴 {free_axis} 外各轴大小与 x 相同",
    "vector_only": "恰好一个轴 (向量)",
    "kind_axes": "一个轴或轴的元组 (`-1`、`row`、`(-1, -2)`)",
    "axis_twice": "在 {shape} 的轴中, 轴 {axis} 被指定了两次",
    "clamp_no_bound": "`clamp` 需要一个界: `min=`、`max=` 或两者",
    "clamp_bound_shape": "界的形状是 {bound}, 不能广播到 x 的形状 {shape} (界不能使 x 变大)",
    "full_value_not_scalar": "`full` 的填充值必须是一个数, 但得到的是形状为 {shape} 的张量",
    "tile_reps": "`tile` 的重复次数必须为正, 但得到 {reps}",
    "flatten_order": "`flatten` 合并从 `start` 到 `end` 的轴: 在 {shape} 中 start {start} 在 end {end} 之后",
    "expand_rank": "`expand` 不能去掉轴: `{x}` 有 {rank} 个轴, 形状只有 {count} 个",
    "expand_new_keep": "`-1` 保留 x 的一个轴, 但 `expand` 形状中的这个轴是新加的: 请给出它的大小",
    "expand_grows": "`expand` 只能扩展大小为 1 的轴: `{x}` 的第 {axis} 个轴是 {have}, 可能不等于 {size}",
    "index_not_int": "`{builtin}` 的下标必须是整数 (`int[...]`), 但 `{text}` 的形状是 {shape}",
    "take_along_rank": "`take_along_axis` 需要与 x 阶数相同的下标: x 的形状是 {shape} (阶 {rank}), 下标是 {index_shape} (阶 {index_rank})",
    "float_index": "`{text}` 的形状是 {shape}: 作为下标的张量必须是整数; 请声明为 `int[...]`",
    "mask_index": "`{text}` 是掩码 ({shape}): 用掩码做下标时结果的形状取决于它的值; 请用 `where` 应用它",
    "one_tensor_index": "`x[...]` 中只能有一项是整数张量 (收集), 其余各项必须是整条轴 `:`",
    "complex_pairs": "`view_as_complex` 把最后一个轴配成 (实部, 虚部): 它的大小必须是 2, 但 {shape} 的最后一个轴是 {last}",
    "complex_even": "`as_complex` 把最后一个轴的相邻元素配对: 它的大小必须是偶数, 但 {shape} 的最后一个轴是 {last}: {relation}",
    "not_complex": "`{builtin}` 需要复数 (`complex[...]`), 但 `{text}` 的形状是 {shape}",
    "complex_input": "`{builtin}` 需要实数, 但 `{text}` 是复数 ({shape})",
    "arange_step": "`arange` 的步长必须是非零整数, 但得到 {step}",
    "scatter_value": "写入的值 {value} 与沿轴 {axis} 写入 {shape} 的位置 {index} 不符: 应为 {expected}",
}

MASK_TEXT = {
    "always_true": "真",
    "always_false": "假",
    "itself": "`{side}`, 与只写一边相同",
    "causal": "因果的",
    "window": "宽度为 {width} 的窗口",
    "every_row": "每个 query 都能看见 key 的",
    "reads_keys": "在 key 一侧读取 `{input}` 的",
    "keeps_masked": "保持被屏蔽的分数仍被屏蔽的",
    "same_as": "与 `{other}` 相同的掩码",
    "decays": "偏向更近的 key 的",
    "differs": "在 {sizes} 时, 它们在 query {q}、key {k} 处不同",
    "farther_favoured": "在 {sizes} 时, query {q} 给 key {k} 的分数改变比更晚的 key 更多",
    "later_key": "在 {sizes} 时, query {q} 看见了 key {k}, 它在自己的位置 {own} 之后",
    "own_hidden": "在 {sizes} 时, query {q} 看不见自己的位置 {own}",
    "beyond_window": "在 {sizes} 时, query {q} 看见了往回 {distance} 个位置的 key {k}",
    "edge_hidden": "在 {sizes} 时, query {q} 看不见往回 {distance} 个位置的 key {k}",
    "query_minus_key": "让 query 的位置增、key 的位置减 (query 减 key)",
    "key_minus_query": "让 key 的位置增、query 的位置减 (key 减 query)",
    "not_relative": "不是一个位置减另一个位置",
    "cache_after": "把缓存的 `{input}` 放在了新 key 之后",
    "cache_before": "把缓存的 `{input}` 放在了新 key 之前",
    "any_size": "任意大小",
    "empty_row": "在 {sizes} 时, query {q} 看不见任何 key",
    "reads_query": "它在 `{index}` 读取 `{input}`, 而不是在 key 的位置 `{key}`",
    "masked_becomes": "被屏蔽的分数 (-inf) 变成了 {value}",
    "nonlinear": "它读取了 {parts} (无法线性证明); 请绑定维度 (`--dim`) 或陈述约束",
    "depends_on": "它取决于 {inputs} 的值",
    "no_proof": "没有证明, 在大小 {limit} 以内也没有反例",
    "not_a_formula": "它的函数体有一部分不是位置的公式 ({part})",
    "unknown_property": "`{word}` 不是性质; 请用 {choices} 之一",
    "unknown_function": "`{name}` 不是上面用 `def` 定义的函数",
    "wrong_kind": "`{word}` 是{wanted}函数的性质; `{name}` 是{kind}函数",
    "arity": "`{name}` 有 {count} 个参数; 掩码接受 (q, k) 或 (b, h, q, k), 分数变换接受 "
    "(score, q, k) 或 (score, b, h, q, k)",
    "hides_kept": "隐藏了 `{input}` 为真的 key",
    "keeps_dropped": "放行了 `{input}` 为真的 key",
    "mask": "掩码",
    "score": "分数",
    "not_property": "不是{claim} ({reason})",
}


TOKEN_WORDS = {
    "NAME": "名字", "INT": "数字", "DECIMAL": "数字", "STRING": "字符串",
    "LPAR": "`(`", "RPAR": "`)`", "LSQB": "`[`", "RSQB": "`]`", "COLON": "`:`",
    "EQUAL": "`=`", "COMMA": "`,`", "EQ": "`==`", "NE": "`!=`", "LE": "`<=`", "GE": "`>=`",
    "LT": "`<`", "GT": "`>`", "PLUS": "`+`", "MINUS": "`-`", "STAR": "`*`", "SLASH": "`/`",
    "DSLASH": "`//`", "AT": "`@`", "POW": "`**`", "TRANSPOSE": "`.T`", "BOOL": "`bool`",
    "INT_TYPE": "`int`", "COMPLEX_TYPE": "`complex`", "PERCENT": "`%`",
    "element_type": "元素类型 (`bool`、`int` 或 `complex`) 加 `[`",
    "AMP": "`&`", "PIPE": "`|`", "TILDE": "`~`", "ELLIPSIS": "`...`",
    "_SEP": "行尾", "$END": "行尾",
    "expression": "表达式", "operator": "运算符或行尾",
}

EXPLAIN = {
    "title": "{id} ({name}): {summary}",
    "severity": "严重程度: {severity}",
    "about_tool": "严重程度: {severity} (说的是 shapecheck 自身的局限, 不是代码: 它从不让 `verify` 失败)",
    "what": "含义",
    "why": "为什么要紧",
    "example": "例子",
    "fix": "怎么改",
    "one_of": "{rest} 或 {last}",
}
