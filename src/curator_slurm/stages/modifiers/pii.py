"""datatrove's ``PIIFormatter`` (``formatters/pii.py``): e-mail addresses and public IP addresses in the text
replaced by fixed, harmless ones, taken in turn."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable

import numpy as np
import pyarrow as pa

from curator_slurm.stages.base import PASSTHROUGH, ProcessingStage
from curator_slurm.stages.text.compute import match_substring, to_numpy
from curator_slurm.stages.text.split import strings
from curator_slurm.tasks import DocumentBatch

#: datatrove's e-mail pattern (RFC 5322's local part, a domain of labels or an IP literal in brackets).
EMAIL_PATTERN = (
    r"\b[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*@(?:(?:[A-Za-z0-9](?:[A-Za-z0-9-]*"
    r"[A-Za-z0-9])?\.)+[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?|\[(?:(?:25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?)\.){3}"
    r"(?:25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?|[A-Za-z0-9-]*[A-Za-z0-9]:)])"
)
#: datatrove's IPv4 pattern: four dotted numbers of 0 to 255.
IP_PATTERN = r"(?:(?:25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?)\.){3}(?:25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?)"
#: datatrove's defaults: example.com/org are reserved for examples; the IPs did not answer pings.
EMAIL_REPLACEMENT = ("email@example.com", "firstname.lastname@example.org")
IP_REPLACEMENT = (
    "22.214.171.124",
    "126.96.36.199",
    "188.8.131.52",
    "184.108.40.206",
    "220.127.116.11",
    "18.104.22.168",
)


def is_public_ip(text: str, public_only: bool = True) -> bool:
    """datatrove's validator: an IP address, and (``public_only``) a globally routable one."""
    try:
        return not public_only or ipaddress.ip_address(text).is_global
    except ValueError:
        return False


class _Replacer:
    """Replaces each valid match by the next replacement in turn (an invalid one stays as it was)."""

    def __init__(self, pattern: str, replacements: tuple[str, ...], valid: Callable[[str], bool] | None) -> None:
        self.regex = re.compile(pattern)
        self.replacements = replacements
        self.valid = valid
        self.turn = 0

    def _one(self, match: re.Match[str]) -> str:
        if self.valid is not None and not self.valid(match.group(0)):
            return match.group(0)
        out = self.replacements[self.turn]
        self.turn = (self.turn + 1) % len(self.replacements)
        return out

    def __call__(self, text: str) -> str:
        return self.regex.sub(self._one, text)


def _replacements(value: tuple[str, ...] | str, name: str) -> tuple[str, ...]:
    out = (value,) if isinstance(value, str) else tuple(value)
    if not out:
        raise ValueError(f"PIIFormatter({name}=()): give at least one replacement")
    return out


class PIIFormatter(ProcessingStage[DocumentBatch, DocumentBatch]):
    """datatrove's ``PIIFormatter``: same parameters, defaults and replacements. E-mail addresses are replaced
    first, then IPv4 addresses (only globally routable ones with ``only_remove_public_ips``), each by the next
    of its replacements in turn. datatrove's turn goes on from document to document in one worker; here it
    starts again with each batch, so a batch's text does not depend on which worker ran what before it.
    Only documents that can hold an address (an ``@``; four dotted numbers) go through Python's regex.

    Args:
        remove_emails: replace e-mail addresses.
        remove_ips: replace IPv4 addresses.
        only_remove_public_ips: replace only globally routable IPv4 addresses.
        email_replacement: what replaces an e-mail address (several: taken in turn).
        ip_replacement: what replaces an IP address (several: taken in turn).
        text_field: the field changed.
    """

    name = "pii_formatter"

    def __init__(
        self,
        remove_emails: bool = True,
        remove_ips: bool = True,
        only_remove_public_ips: bool = True,
        email_replacement: tuple[str, ...] | str = EMAIL_REPLACEMENT,
        ip_replacement: tuple[str, ...] | str = IP_REPLACEMENT,
        text_field: str = "text",
    ) -> None:
        self.remove_emails = remove_emails
        self.remove_ips = remove_ips
        self.only_remove_public_ips = only_remove_public_ips
        self.email_replacement = _replacements(email_replacement, "email_replacement")
        self.ip_replacement = _replacements(ip_replacement, "ip_replacement")
        self.text_field = text_field

    def inputs(self) -> tuple[list[str], list[str]]:
        return ["data"], [self.text_field]

    def outputs(self) -> tuple[list[str], list[str] | None]:
        return ["data"], [PASSTHROUGH]

    def format_texts(self, texts: pa.Array) -> pa.Array:
        """The texts with their addresses replaced."""
        steps: list[tuple[_Replacer, np.ndarray]] = []
        if self.remove_emails:
            steps.append((_Replacer(EMAIL_PATTERN, self.email_replacement, None), match_substring(texts, "@")))
        if self.remove_ips:
            only_public = self.only_remove_public_ips
            ips = _Replacer(IP_PATTERN, self.ip_replacement, lambda ip: is_public_ip(ip, only_public))
            steps.append((ips, match_substring(texts, r"[0-9]\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]", regex=True)))
        maybe = np.zeros(len(texts), dtype=bool)
        for _, found in steps:
            maybe |= to_numpy(found)
        if not maybe.any():
            return texts
        values = texts.to_pylist()
        for row in np.flatnonzero(maybe).tolist():
            text = values[row]
            for replace, _ in steps:
                text = replace(text)
            values[row] = text
        return pa.array(values, texts.type)

    def process(self, task: DocumentBatch) -> DocumentBatch:
        table = task.data
        if self.text_field not in table.column_names:
            from curator_slurm.errors import InputError

            where = task.where()
            raise InputError(
                f"{where}: PIIFormatter needs the field {self.text_field!r}; the data has {table.column_names}. "
                "Set text_field= to one of them."
            )
        at = table.column_names.index(self.text_field)
        column = table.column(at)
        formatted = self.format_texts(strings(column)).cast(column.type)
        return task.derive(table.set_column(at, self.text_field, formatted))


__all__ = ["EMAIL_PATTERN", "EMAIL_REPLACEMENT", "IP_PATTERN", "IP_REPLACEMENT", "PIIFormatter", "is_public_ip"]
