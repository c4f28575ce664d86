"""Everything nvgg writes goes out here: one writer for every path (files.py: atomic for a regular
file, through a link, a descriptor, a FIFO or a device), one interface for every format
(printer.py: a printer turns a report into text; a format is one file, NAME_printer.py), and the
files of a command kept up to date as its report grows (live.py)."""

from .live import Live, Target
from .printer import Document, Printer, find, names, register, registry

__all__ = ["Document", "Live", "Printer", "Target", "find", "names", "register", "registry"]
