"""A runtime's verdict on a model file, and its one-line form in the manifest's `self_check`."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar


@dataclass(frozen=True)
class CheckResult:
    """One runtime's verdict on one model file (the build's self-check, `edge-m3 check`).

    The manifest keeps it as one line, `str(result)`: "ok (2.3.0, XNNPACK runs 9 of 9
    FULLY_CONNECTED)", "FAILED (2.14.0): Registration failed.", "not installed"; `parse` reads
    that line back, so nothing else takes the string apart.
    """

    status: str  # OK, FAILED or NOT_INSTALLED
    version: str | None = None  # the runtime's, when it ran
    detail: str = ""  # ok: what it also saw; FAILED: why

    OK: ClassVar[str] = "ok"
    FAILED: ClassVar[str] = "FAILED"
    NOT_INSTALLED: ClassVar[str] = "not installed"
    _OK_LINE: ClassVar[re.Pattern[str]] = re.compile(r"ok \(([^,()]*)(?:, (.*))?\)", re.DOTALL)
    _FAILED_LINE: ClassVar[re.Pattern[str]] = re.compile(r"FAILED \(([^()]*)\): (.*)", re.DOTALL)

    @classmethod
    def passed(cls, version: str, detail: str = "") -> CheckResult:
        return cls(cls.OK, version, detail)

    @classmethod
    def failed(cls, version: str | None, why: str) -> CheckResult:
        return cls(cls.FAILED, version, why)

    @property
    def ok(self) -> bool:
        return self.status == self.OK

    @property
    def is_failure(self) -> bool:
        """The runtime ran and failed (not installed is no failure)."""
        return self.status == self.FAILED

    def __str__(self) -> str:
        if self.status == self.OK:
            return f"ok ({self.version}{', ' + self.detail if self.detail else ''})"
        if self.status == self.FAILED:
            return f"FAILED ({self.version}): {self.detail}"
        return self.status

    @classmethod
    def parse(cls, line: str) -> CheckResult:
        """The manifest's line back as a result; ValueError for any other text."""
        if line == cls.NOT_INSTALLED:
            return cls(cls.NOT_INSTALLED)
        if m := cls._OK_LINE.fullmatch(line):
            return cls(cls.OK, m.group(1), m.group(2) or "")
        if m := cls._FAILED_LINE.fullmatch(line):
            return cls(cls.FAILED, m.group(1), m.group(2))
        raise ValueError(f"{line!r} is not 'ok (VERSION[, ...])', 'FAILED (VERSION): ...' or "
                         f"'{cls.NOT_INSTALLED}'")
