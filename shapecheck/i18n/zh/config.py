"""配置的中文信息: :data:`shapecheck.config.MESSAGES` 的翻译.

文件名、行号和键名写在前面 (见 ``ConfigError``); 键名和代码保持原样。
"""

from __future__ import annotations

MESSAGES = {
    "one_file": "只能给出一个配置文件",
    "cannot_read": "无法读取配置: {reason}",
    "no_section": "没有 [tool.shapecheck] 表",
    "top_level": "在这个文件里, 设置直接写在顶层, 不要 [tool.shapecheck] 表头",
    "not_toml": "不是有效的 TOML: {error}",
    "not_inline": "`{item}` 既不是文件, 也不是 TOML 的 `KEY = VALUE` ({error})",
    "unknown_key_close": "未知的键; 你是想写 `{close}` 吗?",
    "not_modules": "`modules` 列出 Python 目标: \"FILE.py:NAME\" 或 {{ target = "
    "\"FILE.py:NAME\", init = {{ NAME = SIZE、\"DIM\" 或 \"[SHAPE]\" }} }}, 得到的是 {value}",
    "unknown_key": "未知的键; 可用的键是 {keys}",
    "not_bool": "必须是 true 或 false, 而不是 {value}",
    "not_fail_on": "必须是 \"warning\" 或 \"error\", 而不是 {value}",
    "fail_on_and_strict": "`strict` 是 `fail-on` 的别名; 只给其中一个",
    "not_strings": "必须是字符串列表, 而不是 {value}",
    "not_table_ignores": "必须是 模式 = [代码] 的表, 而不是 {value}",
    "not_table_dims": "必须是 名字 = 正整数 的表, 而不是 {value}",
    "not_dim_name": "不是维度名",
    "not_positive": "必须是正整数, 而不是 {value}",
    "a_table": "一个表",
    "no_code": "`{selector}` 不匹配任何代码 (代码形如 `SC402`; 也可以用前缀 `SC4` 和 `ALL`)",
    "is_error": "`{selector}` 是 error, 而 error 不能被忽略 (只有 warning 和 note 可以)",
    "only_errors": "`{selector}` 只匹配 error, 而 error 不能被忽略 (只有 warning 和 note 可以)",
}
