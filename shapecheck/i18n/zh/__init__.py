"""The Chinese catalogue (简体中文), in the study note's own words.

One module per group of tables (see :mod:`shapecheck.i18n`): ``codes`` (the registry and its
word tables), ``report`` (the report's templates), ``run`` (``shapecheck run``), ``formats``
(the summaries of ``verify``) and ``cli`` (the command line's own messages). Each holds a
dict per English table, under the same name and with the same keys and ``{fields}``.

The terms are the note's (``000_*.txt`` in the study note): 速记卡片 (the cheat card),
30 秒自检 (the self-check), 内维 (the inner dimensions of ``QKᵀ``), 匹配分数表 (the N×N
score table), 按行 softmax, 下标版 (the index form), and the database analogy — Q 查询
(query), K 索引 (key), V 内容 (value). Code identifiers, shapes, the spec's names, the
severities (``error``, ``warning``, ``note``) and the ``help:``/``note:`` labels stay as
written: tools parse them.
"""
