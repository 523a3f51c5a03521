"""Domain errors. They carry no HTTP: the CLI and the web layer map them to messages in one place."""

from __future__ import annotations


class InputError(ValueError):
    """Invalid input, with the dotted path of the field at fault and what is wrong with it."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}" if field else message)
        self.field = field
        self.message = message

    def under(self, prefix: str) -> InputError:
        """The same error, re-rooted under a parent field path."""
        path = f"{prefix}.{self.field}" if self.field else prefix
        return InputError(path, self.message)


class ConflictError(InputError):
    """The input names something that already exists (a taken slug): the web answers 409."""
