"""The former name of :mod:`satcal.study`, kept for one release: ``Workspace`` is
:class:`satcal.study.Study`."""
from .study import *  # noqa: F401,F403
from .study import STUDY_TEMPLATE, Study, Workspace, running_server, served_answers, validate_config  # noqa: F401
