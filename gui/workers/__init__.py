"""Work off the GUI thread: a worker QObject in a QThread and the job that owns both
(:mod:`gui.workers.jobs`), report loading (:mod:`gui.workers.load`), one-result-per-key background
calls where the latest request wins (:mod:`gui.workers.latest`) and the Run view's session worker
(:mod:`gui.workers.run`)."""

from engine.system.errors import Cancelled
from gui.workers.jobs import CallWorker, Job, Worker, running_threads
from gui.workers.load import LoadedReport, LoadWorker, Opener

__all__ = ["CallWorker", "Cancelled", "Job", "LoadWorker", "LoadedReport", "Opener", "Worker",
           "running_threads"]
