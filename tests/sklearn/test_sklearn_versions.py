"""Which pins a joblib/scikit-learn pool adds to its image, and how version drift is told."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from packaging.version import Version

from skyward.errors import ConfigurationError
from skyward_sklearn.versions import Wanted, installed_versions, pins_to_add, version_problems

CLIENT = {"scikit-learn": "1.9.1", "joblib": "1.6.0", "numpy": "2.4.6", "scipy": None}
SKLEARN = [Wanted("scikit-learn"), Wanted("joblib", required=False), Wanted("numpy", required=False)]


def pins(
    wanted: list[Wanted], image_pip: list[str] | None = None, reuses: bool = False, client: dict | None = None
) -> tuple[str, ...]:
    return pins_to_add(wanted, client or CLIENT, image_pip or [], reuses, owner="ScikitLearnPool(...)")


def test_a_pool_on_the_client_interpreter_gets_no_pins() -> None:
    assert pins(SKLEARN, reuses=True) == ()


def test_any_other_pool_gets_the_client_versions() -> None:
    assert pins(SKLEARN) == ("scikit-learn==1.9.1", "joblib==1.6.0", "numpy==2.4.6")


def test_a_companion_the_client_lacks_is_not_pinned() -> None:
    assert pins([Wanted("scipy", required=False)]) == ()


def test_the_library_itself_must_be_on_the_client() -> None:
    with pytest.raises(ConfigurationError, match="needs scipy installed on this client"):
        pins([Wanted("scipy")])


def test_asking_for_the_client_version_is_accepted_and_normalised() -> None:
    assert pins([Wanted("joblib", "1.6")], client={"joblib": "1.6.0"}) == ("joblib==1.6.0",)


def test_asking_for_another_version_is_refused_before_provisioning() -> None:
    with pytest.raises(
        ConfigurationError, match=r"scikit-learn 1\.5\.2 was asked for.*this client runs scikit-learn 1\.9\.1"
    ):
        pins([Wanted("scikit-learn", "1.5.2")])


@pytest.mark.parametrize("bad", ["", "   "])
def test_an_empty_version_is_refused(bad: str) -> None:
    with pytest.raises(ConfigurationError, match="version is empty"):
        pins([Wanted("joblib", bad)])


def test_a_non_string_version_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="must be a string"):
        pins([Wanted("joblib", 1.6)])  # type: ignore[arg-type]


def test_an_image_requirement_that_excludes_the_client_version_is_refused() -> None:
    with pytest.raises(ConfigurationError, match=r"the image asks for scikit-learn<1\.5"):
        pins(SKLEARN, image_pip=["scikit-learn<1.5"])


def test_a_compatible_image_requirement_gets_the_pin_next_to_it() -> None:
    assert pins([Wanted("scikit-learn")], image_pip=["Scikit_Learn>=1.4"]) == ("scikit-learn==1.9.1",)


def test_a_url_requirement_is_the_users_choice() -> None:
    assert pins([Wanted("joblib")], image_pip=["joblib @ git+https://github.com/joblib/joblib"]) == ()


def test_same_versions_are_no_problem() -> None:
    assert version_problems(CLIENT, dict(CLIENT), {"joblib", "scikit-learn"}) == []


def test_a_differing_version_is_named() -> None:
    problems = version_problems({"scikit-learn": "1.9.1"}, {"scikit-learn": "1.5.2"}, {"scikit-learn"})
    assert problems == ["scikit-learn differs: this client runs 1.9.1, the workers run 1.5.2"]


def test_a_required_library_missing_on_the_workers_is_named() -> None:
    problems = version_problems({"scikit-learn": "1.9.1"}, {"scikit-learn": None}, {"scikit-learn"})
    assert problems == ["scikit-learn is not installed on the workers (this client has scikit-learn 1.9.1)"]


def test_an_optional_library_missing_on_the_workers_is_no_problem() -> None:
    assert version_problems({"scikit-learn": "1.9.1"}, {"scikit-learn": None}, {"joblib"}) == []


def test_an_optional_library_that_differs_is_still_a_problem() -> None:
    assert len(version_problems({"scikit-learn": "1.9.1"}, {"scikit-learn": "1.9.0"}, set())) == 1


def test_installed_versions_reads_metadata() -> None:
    import joblib

    found = installed_versions(["joblib", "surely-not-installed-skyward-test"])
    assert found == {"joblib": joblib.__version__, "surely-not-installed-skyward-test": None}


versions = st.from_regex(r"\A[0-9]{1,2}\.[0-9]{1,2}\.[0-9]{1,2}\Z")
names = st.sampled_from(["joblib", "scikit-learn", "numpy", "scipy"])


@given(st.dictionaries(names, st.none() | versions), st.sets(names))
def test_identical_sides_never_differ(side: dict[str, str | None], required: set[str]) -> None:
    problems = version_problems(side, dict(side), required)
    # only a required library absent on both sides is reported (twice absent is still absent)
    assert len(problems) == sum(1 for name in required & set(side) if side[name] is None)


@given(names, versions, versions)
def test_one_problem_per_differing_library(name: str, mine: str, theirs: str) -> None:
    problems = version_problems({name: mine}, {name: theirs}, {name})
    assert len(problems) == (0 if Version(mine) == Version(theirs) else 1)  # PEP 440: 1.0 == 1.0.0


@given(versions, st.none() | versions, st.booleans())
def test_pins_are_the_client_version_or_an_error(have: str, requested: str | None, reuses: bool) -> None:
    client = {"joblib": have}
    try:
        added = pins([Wanted("joblib", requested)], reuses=reuses, client=client)
    except ConfigurationError:
        assert requested is not None and Version(requested) != Version(have)
        return
    assert added == (() if reuses else (f"joblib=={have}",))
