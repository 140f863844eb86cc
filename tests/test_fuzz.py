"""Bad input to the public API is refused by the library itself, clearly (tests/fuzz_inputs.py).

Each case must raise ValueError or TypeError from inside attnsvm: never return (a silent wrong
answer) and never crash inside torch, NumPy or cvxpy (an unclear error).
"""

import warnings

import pytest

from fuzz_inputs import all_cases, outcome

CASES = all_cases(seed=0)


def test_the_fuzz_is_large():
    entries = {entry for entry, *_ in CASES}
    assert len(CASES) >= 500 and len(entries) == 6


@pytest.mark.parametrize("entry, kind, what, thunk", CASES,
                         ids=[f"{i:03d}-{e}-{k}" for i, (e, k, _, _) in enumerate(CASES)])
def test_bad_input_is_refused_clearly(entry, kind, what, thunk):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert outcome(thunk) == "clear", f"{entry}: {what}"
