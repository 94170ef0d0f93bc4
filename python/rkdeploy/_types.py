"""The exception classes and record types rkdeploy's extension modules return.

Every error rkdeploy raises is an ``rkdeploy.Error`` carrying the message the command line
prints (it names the file, tensor, node or field); its subclass says the kind, as the command
line's exit status and ``--json`` error object do.
"""
from collections import namedtuple


class Error(RuntimeError):
    """An error of rkdeploy (the message names the file, tensor, node or field)."""

    kind = "error"


class InvalidError(Error, ValueError):
    """The input breaks a rule of its format or of the operation."""

    kind = "invalid"


class UnsupportedError(Error):
    """The input is valid, but this build or device cannot run it."""

    kind = "unsupported"


class IoError(Error, OSError):
    """The file system, the OS or the device driver failed."""

    kind = "io"


class InternalError(Error):
    """A broken invariant inside rkdeploy (a bug: please report it)."""

    kind = "internal"


TensorInfo = namedtuple("TensorInfo", "name shape dtype")
TensorInfo.__doc__ = "A model input or output: name, shape (a tuple; a str for a symbolic dimension), NumPy dtype name."

Detection = namedtuple("Detection", "label name score x0 y0 x1 y1")
Detection.__doc__ = "One object found in a photo: class index, COCO name (None past the 80), score, box corners in photo pixels."
