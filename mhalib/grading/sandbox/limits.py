"""The limits one graded notebook runs under (time, memory, output, files, records)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields


@dataclass(frozen=True)
class Limits:
    """Budgets for one student's notebook in the sandbox.

    notebook_seconds: wall time for the whole notebook (the sandboxed process tree is killed
        when it runs out; exercises recorded before that keep their results).
    cell_seconds: wall time for one cell; the cell gets an error and the notebook goes on.
    call_seconds: wall time for one call of a learner's function on a grader-chosen input.
    memory_mb: address space the learner's process may add on top of the pre-imported
        libraries (numpy, torch, matplotlib); beyond it allocations fail with MemoryError.
    output_bytes: bytes of cell output kept per notebook (the rest is dropped and flagged).
    cell_output_bytes: bytes of output kept per cell.
    scratch_mb: size of the writable scratch file system (working folder, /tmp, /dev/shm).
    notebook_bytes: largest submitted notebook file read at all.
    files_bytes: total size of the other files of a submission copied into its folder.
    record_bytes: largest file the notebook's process leaves for the grader (one exercise's
        record, one exported class-cache entry); a larger one is not read (``bad_record``).
    """

    notebook_seconds: float = 120.0
    cell_seconds: float = 60.0
    call_seconds: float = 10.0
    memory_mb: int = 2048
    output_bytes: int = 1_000_000
    cell_output_bytes: int = 100_000
    scratch_mb: int = 256
    notebook_bytes: int = 20_000_000
    files_bytes: int = 20_000_000
    record_bytes: int = 24 * 1024 * 1024

    def __post_init__(self):
        for item in fields(self):
            value = getattr(self, item.name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"{item.name}={value!r} must be a positive number")
        if self.cell_output_bytes > self.output_bytes:
            raise ValueError(f"cell_output_bytes={self.cell_output_bytes} is larger than "
                             f"output_bytes={self.output_bytes}")

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> Limits:
        return cls(**{f.name: data[f.name] for f in fields(cls) if f.name in data})
