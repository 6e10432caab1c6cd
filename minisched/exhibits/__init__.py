"""Chapter exhibits and test harnesses that ship with minisched but are not the scheduler: models
a chapter runs against the real code and a test reuses (queue_machine: a hypothesis state machine
over the SchedulingQueue; sharding_sim: sharded replicas in one process, one of them pausable, and
the §4.3 runs on them). They sit at the notebooks' layer, above everything they exercise.

Some need what only the `exhibits` extra installs (`pip install 'minisched[exhibits]'`; the `test`
extra has it too): importing one without it is an ImportError that names the extra. Nothing below
this package imports from it, so the library itself runs on a plain install.
"""

EXHIBITS_EXTRA = "exhibits"


def missing_extra(module: str, package: str, error: ImportError) -> ImportError:
    """The ImportError an exhibit raises when `package` (from the exhibits extra) is not installed."""
    return ImportError(
        f"{module} needs {package}, which a plain install of minisched does not bring: "
        f"pip install 'minisched[{EXHIBITS_EXTRA}]' (the test extra has it too); {error}",
        name=package,
    )
