"""``Record``: plain data with named fields, for modules on the hot ``run`` path.

A dataclass generates and compiles its methods when the module is imported; fourteen of them
cost several milliseconds of every cron firing (DESIGN §7 budget). A Record declares its fields
in ``__slots__`` and its defaults in ``_defaults`` and generates nothing.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing itself costs milliseconds of import on the hot path
if TYPE_CHECKING:
    from typing import Any


class Record:
    __slots__: tuple[str, ...] = ()
    _defaults: dict[str, Any] = {}
    _factories: dict[str, Any] = {}  # field -> callable making a fresh default (lists, dicts)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        names = self.__slots__
        if len(args) > len(names):
            raise TypeError(f"{type(self).__name__} takes at most {len(names)} fields")
        kwargs.update(zip(names, args))
        for name in names:
            if name in kwargs:
                value = kwargs.pop(name)
            elif name in self._factories:
                value = self._factories[name]()
            elif name in self._defaults:
                value = self._defaults[name]
            else:
                raise TypeError(f"{type(self).__name__}: missing field {name!r}")
            object.__setattr__(self, name, value)
        if kwargs:
            raise TypeError(f"{type(self).__name__}: unknown fields {sorted(kwargs)}")

    def asdict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}

    def replace(self, **changes: Any) -> Record:
        return type(self)(**{**self.asdict(), **changes})

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and self.asdict() == other.asdict()  # type: ignore[union-attr]

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in self.asdict().items())
        return f"{type(self).__name__}({fields})"

    __hash__ = None  # type: ignore[assignment]
