import numpy as np
import pytest


@pytest.fixture(scope="session")
def ecir_study():
    from satcal.datasets import load_ecir2015
    return load_ecir2015()


@pytest.fixture(scope="session")
def ecir_result(ecir_study):
    from satcal.analysis import calibrate
    return calibrate(ecir_study, model_check_folds=5, seed=1)


@pytest.fixture
def rng():
    return np.random.default_rng(12345)
