"""The former name of :mod:`satcal.study`, kept for one release: ``Workspace`` is
:class:`satcal.study.Study`."""
from .study import STUDY_TEMPLATE, Study, Workspace, running_server, served_answers, validate_config

__all__ = ["Study", "Workspace", "STUDY_TEMPLATE", "running_server", "served_answers", "validate_config"]
