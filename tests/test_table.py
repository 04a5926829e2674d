"""TP4's Table 1 (tp.table)."""
import pytest

import tp_limits as tp


def test_table_markdown_and_text():
    t = tp.table([tp.sp(2), tp.sp(2, c=1), tp.ntp(2), tp.mup(2)])
    md = t.markdown().splitlines()
    assert md[0].startswith("| name | a_l | b_l | c | r |") and len(md) == 6
    assert "| SP (c=1) | (0, 0, 0) | (0, 1/2, 1/2) | 1 | 1/2 | 1 | 1 | yes | yes | no | yes |" in md
    assert "| muP | (-1/2, 0, 1/2) | (1/2, 1/2, 1/2) | 0 | 0 | 1 | 1 | yes | yes | yes | no |" in md
    text = str(t).splitlines()
    assert text[0].startswith("name") and len(text) == 6


def test_q_column_shows_the_optimizers_formula():
    assert tp.table([tp.mup(2)]).columns[5] == "q = 2a_{L+1}+c"
    adam = tp.table([tp.mup(2, optimizer="adam")])
    assert adam.columns[5] == "q = a_{L+1}+c"
    both = tp.table([tp.mup(2), tp.mup(2, optimizer="adam")]).columns[5]
    assert "adam: a_{L+1}+c" in both and "sgd: 2a_{L+1}+c" in both


@pytest.mark.parametrize("bad", [[], 5, [tp.mup(1), "sp"]])
def test_bad_input_is_a_library_error(bad):
    with pytest.raises(tp.TPError, match="table"):
        tp.table(bad)
