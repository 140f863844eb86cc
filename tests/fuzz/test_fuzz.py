"""Bad input to the public API is refused by the library itself, clearly (tests/fuzz/fuzz_inputs.py).

Each case must raise ValueError or TypeError from inside attnsvm: never return (a silent wrong
answer) and never crash inside torch, NumPy or cvxpy (an unclear error).
"""

import inspect
import sys
import warnings

import pytest

import attnsvm as A
from fuzz_inputs import all_cases, module_exempt, outcome

CASES = all_cases(seed=0)


def test_the_fuzz_is_large():
    entries = {entry for entry, *_ in CASES}
    assert len(CASES) >= 1200 and len(entries) >= 40


@pytest.mark.parametrize("entry, kind, what, thunk", CASES,
                         ids=[f"{i:03d}-{e}-{k}" for i, (e, k, _, _) in enumerate(CASES)])
def test_bad_input_is_refused_clearly(entry, kind, what, thunk):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert outcome(thunk) in ("clear", "correct"), f"{entry}: {what}"


# Public names that take no input of their own: constants, exception classes,
# the result containers the library builds (their methods are fuzzed where they have one), and
# the scale switch (it reads ATTNSVM_SCALE, no argument; at_scale passes any value through).
EXEMPT = {"LOSSES", "KINDS", "OUTCOMES", "DEFAULT_DTYPE", "RANK_TOL", "__version__", "Reached", "ReachedWarning",
          "InfeasibleError", "IllConditionedError", "NoMarginError", "TrainingError", "PathWarning", "FrozenWarning",
          "SVMResult", "GenSVMResult", "PathResult", "SolutionSetProbe", "KINDS_OF_CLAIM", "NuclearDual", "FirstOrderNuclear", "scale", "at_scale",
          "A4_D", "A4_PAPER", "A4Comparison", "TrapInstance", "A6Runs",
          # path_study / digits / next_token: a constant and the result containers their functions build
          "CANDIDATE_KINDS", "GlobalPath", "TranslatedDigits", "NTPData", "NTPHistory"} | module_exempt()


SUBPACKAGES = (A.model, A.maxmargin, A.studies, A.book)


def _public() -> dict:
    """Every public name of the library: the subpackages' (the top level re-exports some of them)."""
    names = {name: getattr(sub, name) for sub in SUBPACKAGES for name in sub.__all__}
    names.update((name, getattr(A, name)) for name in A.__all__ if getattr(A, name) not in SUBPACKAGES)
    return names


def test_the_top_level_is_the_core_and_the_names_are_unique():
    """A small top level, and no name means two things in two subpackages."""
    assert len(A.__all__) <= 50
    seen = {}
    for sub in SUBPACKAGES:
        for name in sub.__all__:
            assert name not in seen, f"{name} in both {seen[name]} and {sub.__name__}"
            seen[name] = sub.__name__
    for name in A.__all__:
        obj = getattr(A, name)
        assert obj in SUBPACKAGES or name == "__version__" or obj is getattr(A.model, name, None) \
            or obj is getattr(A.maxmargin, name, None), name


def _codes() -> dict:
    """The code objects of every public function and method, mapped to their public name."""
    codes = {}
    for name, obj in _public().items():
        members = vars(obj).values() if inspect.isclass(obj) else [obj]
        for member in members:
            member = getattr(member, "__func__", member)
            member = member.fget if isinstance(member, property) else member
            if inspect.isfunction(member):
                codes[member.__code__] = name
    return codes


def test_every_public_name_is_fuzzed():
    """Run the whole fuzz under a profiler: every public name outside EXEMPT must be called."""
    codes, called = _codes(), set()

    def profile(frame, event, arg):
        if event == "call" and frame.f_code in codes:
            called.add(codes[frame.f_code])

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sys.setprofile(profile)
        try:
            for *_, thunk in CASES:
                outcome(thunk)
        finally:
            sys.setprofile(None)
    missing = set(_public()) - EXEMPT - called
    assert not missing, f"public names without fuzz cases: {sorted(missing)}"
