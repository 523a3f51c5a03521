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


    def as_written(self, field: str, written: str, read_as: str, subject: str = "") -> InputError:
        """The same error under the name the user wrote (a vLLM flag, an environment variable, an
        older key) for what we call `read_as`: the message names what they wrote, then says what it
        is read as. `subject`: the name the message opens with, replaced by the written one."""
        opens = bool(subject) and self.message.startswith(subject + " ")
        body = written + self.message[len(subject):] if opens else f"{written}: {self.message}"
        return InputError(field, f"{body} (read as {read_as})")


class ConflictError(InputError):
    """The input names something that already exists (a taken slug): the web answers 409."""
