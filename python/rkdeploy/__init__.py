"""rkdeploy: detection models to Rockchip NPUs, verified on any Linux host (docs/python.md).

``rkdeploy.Runtime`` runs a compiled ``.rkd`` artifact through the embeddable runtime
(librkdeploy_rt) - on a board, that is all an application needs. The workflows of the command
line (``load``, ``quantize``, ``evaluate``, ``accuracy``, ``analyze``, ``compile``, ``plan``,
``bench``, ``export``) come with the full toolkit's module, when it is installed.
"""
from ._types import Detection, Error, InternalError, InvalidError, IoError, TensorInfo, UnsupportedError
from ._rt import Runtime, runtime_version

__version__ = runtime_version

try:
    from ._host import Model, accuracy, analyze, backends, bench, compile, environment, evaluate, export, plan, quantize, strategies
except ImportError as e:  # the runtime-only install (a board): no workflows
    if e.name != __name__ + "._host":
        raise
else:
    load = Model
