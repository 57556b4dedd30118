"""Plain-Python events (napari-like): the model emits, views connect callbacks; no Qt here."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any


class Event:
    """What an emitter sends: its type, its source, and the keyword values given to emit."""

    def __init__(self, type: str, source: Any, **values: Any) -> None:  # noqa: A002 - napari's name
        self.type = type
        self.source = source
        self.__dict__.update(values)

    def __repr__(self) -> str:
        extra = ", ".join(f"{k}={v!r}" for k, v in self.__dict__.items() if k not in ("type", "source"))
        return f"Event({self.type!r}{', ' + extra if extra else ''})"


Callback = Callable[[Event], Any]


class EventEmitter:
    """One kind of event: callbacks connected to it run, in connection order, on every emit."""

    def __init__(self, type: str, source: Any = None) -> None:  # noqa: A002
        self.type = type
        self.source = source
        self._callbacks: list[Callback] = []

    def connect(self, callback: Callback) -> Callable[[], None]:
        """Call callback(event) on every emit; returns a function that disconnects it."""
        self._callbacks.append(callback)
        return lambda: self.disconnect(callback)

    def disconnect(self, callback: Callback) -> None:
        """Stop calling callback (nothing happens when it is not connected)."""
        if callback in self._callbacks:
            self._callbacks.remove(callback)

    @property
    def callbacks(self) -> list[Callback]:
        """The connected callbacks, in the order they run."""
        return list(self._callbacks)

    def emit(self, **values: Any) -> Event:
        """Send an event carrying values to every callback; returns it."""
        event = Event(self.type, self.source, **values)
        for cb in list(self._callbacks):
            cb(event)
        return event


class EmitterGroup:
    """A model's named emitters, reached as attributes: model.events.scanned.connect(cb)."""

    def __init__(self, source: Any, names: tuple[str, ...]) -> None:
        self._emitters = {name: EventEmitter(name, source) for name in names}

    def __getattr__(self, name: str) -> EventEmitter:
        try:
            emitters: dict[str, EventEmitter] = self.__dict__["_emitters"]
            return emitters[name]
        except KeyError:
            raise AttributeError(f"no event named {name!r}") from None

    def __iter__(self) -> Iterator[EventEmitter]:
        return iter(self._emitters.values())

    @property
    def names(self) -> tuple[str, ...]:
        """The event names, in declaration order."""
        return tuple(self._emitters)
