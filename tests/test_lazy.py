"""roofline.lazy: sympy's Min/Max built through a memo of their arguments, with the same results as unmemoized."""

from roofline.lazy import sp


def test_min_max_memo_returns_what_sympy_builds():
    """Each node equals the one sympy's own constructor builds (reduction included), and a second build of the
    same arguments is that same object; sympy's `evaluate(False)` switch (which clears sympy's caches) still
    leaves the node unevaluated."""
    from sympy.functions.elementary.miscellaneous import MinMaxBase

    x, y = sp.Symbol("x", positive=True), sp.Symbol("y", integer=True)
    unmemoized = MinMaxBase.__new__.__wrapped__
    cases = [(sp.Min, (x, 0)), (sp.Max, (x - 4, 0)), (sp.Min, (x, x + 1, 7)), (sp.Max, (y, y - 2, 3)),
             (sp.Min, (sp.Max(x - 32, 0), 96))]
    for cls, args in cases:
        built = cls(*args)
        assert built == unmemoized(cls, *args)
        assert cls(*args) is built
    assert sp.Min(x, 0) == 0 and sp.Max(x, x + 1) == x + 1  # reduced as sympy reduces them
    with sp.evaluate(False):
        assert isinstance(sp.Min(x, 0), sp.Min)
    assert sp.Min(x, 0) == 0
    assert sp.Max(x, 2).subs(x, 5) == 5
