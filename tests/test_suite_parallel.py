"""The suite's own parallel run (tests/conftest.py): how many workers, and the order in which
modules are handed out."""
import pytest

from conftest import MAX_WORKERS, parallel_workers, slow_modules_first


@pytest.mark.parametrize("cores, expected", [(1, 0), (2, 2), (3, 3), (64, MAX_WORKERS)])
def test_one_worker_a_core_and_none_on_one_core(cores, expected):
    assert parallel_workers(cores) == expected


class _Item:
    def __init__(self, nodeid, slow=False):
        self.nodeid, self._slow = nodeid, slow

    def get_closest_marker(self, name):
        return object() if name == "slow" and self._slow else None


def test_modules_with_a_slow_test_are_handed_out_first_in_their_order():
    items = [_Item("tests/test_a.py::t1"), _Item("tests/test_a.py::t2"),
             _Item("tests/test_b.py::t1"), _Item("tests/test_b.py::t2", slow=True),
             _Item("tests/test_c.py::t1", slow=True), _Item("tests/test_d.py::t1")]
    slow_modules_first(items)
    # worked by hand: b and c hold a slow test (b's first test is not slow, it moves with its
    # module); a and d follow; every module's tests keep their order
    assert [i.nodeid for i in items] == [
        "tests/test_b.py::t1", "tests/test_b.py::t2", "tests/test_c.py::t1",
        "tests/test_a.py::t1", "tests/test_a.py::t2", "tests/test_d.py::t1"]
