"""``Record``: plain data with named, annotated fields, for modules on the hot ``run`` path.

A dataclass generates and compiles its methods when the module is imported; fourteen of them
cost several milliseconds of every cron firing (the budget: ARCHITECTURE.md §9). A Record declares its fields
as class annotations (which cost nothing at run time under ``from __future__ import
annotations``, and which a type checker reads), its defaults in ``_defaults``, and generates
nothing. A class may still list its fields in ``__slots__`` instead.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing itself costs milliseconds of import on the hot path
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any, ClassVar


class Record:
    __slots__ = ()
    _fields: ClassVar[tuple[str, ...]] = ()
    _defaults: ClassVar[dict[str, Any]] = {}
    _factories: ClassVar[dict[str, Any]] = {}  # field -> callable making a fresh default
    _field_set: ClassVar[frozenset[str]] = frozenset()
    _by_dict: ClassVar[bool] = False  # __init__ may set the fields in __dict__ at once
    _defaulted: ClassVar[bool] = False  # ... and the missing ones from _defaults

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        slots = cls.__dict__.get("__slots__")
        if slots:
            cls._fields = tuple(slots)
        else:
            names: list[str] = []
            for klass in reversed(cls.__mro__):
                for name in klass.__dict__.get("__annotations__", {}):
                    if not name.startswith("_") and name not in names:
                        names.append(name)
            cls._fields = tuple(names)
        cls._field_set = frozenset(cls._fields)
        # __init__'s shortcut: fields kept in __dict__, set by no __setattr__ of the class's;
        # for fields left out, defaults that are all fields and no factory
        cls._by_dict = cls.__dictoffset__ != 0 and all(
            "__setattr__" not in vars(klass) for klass in cls.__mro__ if klass is not object)
        cls._defaulted = not cls._factories and cls._defaults.keys() <= cls._field_set

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        names = self._fields
        if len(args) > len(names):
            raise TypeError(f"{type(self).__name__} takes at most {len(names)} fields")
        if args:
            kwargs.update(zip(names, args))
        if self._by_dict and (kwargs.keys() == self._field_set if len(kwargs) == len(names)
                              else self._defaulted and kwargs.keys() <= self._field_set
                              and self._field_set - kwargs.keys() <= self._defaults.keys()):
            # every field given or defaulted (no factory): set at once, not one by one (status
            # builds 10,000 records: this was a third of its time in Python)
            if len(kwargs) < len(names):
                self.__dict__.update(self._defaults)
            self.__dict__.update(kwargs)
            return
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
        if self._by_dict:  # the fields as __init__ set them, without a getattr each
            found = self.__dict__
            return {name: found[name] for name in self._fields}
        return {name: getattr(self, name) for name in self._fields}

    def replace(self, **changes: Any) -> Any:
        return type(self)(**{**self.asdict(), **changes})

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Record) and type(other) is type(self) \
            and self.asdict() == other.asdict()

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in self.asdict().items())
        return f"{type(self).__name__}({fields})"

    __hash__ = None  # type: ignore[assignment]



if TYPE_CHECKING:
    from enum import StrEnum

    Words = StrEnum
else:
    class _Set(type):
        def __iter__(cls) -> Iterator[Words]:  # the members in their order, as an enum's
            return iter(cls._members)

    class Words(str, metaclass=_Set):
        """A closed set of named strings (``Status.FAILED == "failed"``), which the type
        checker reads as the StrEnum it stands for. At run time each member is an instance of
        its set, a str subclass made once (``str()``, f-strings, JSON, SQLite and psycopg take
        it as its text; ``.value`` is that text; the set iterates over its members): the enum
        machinery cost every firing ~1 ms for model.py's four sets (4.3 M instructions of
        160 M, measured under callgrind). What a StrEnum does besides (refusing an unknown
        value, a member's ``name``) cronwrap does not use."""

        __slots__ = ()
        _members: tuple[Words, ...] = ()

        def __init_subclass__(cls, **kwargs: Any) -> None:
            super().__init_subclass__(**kwargs)
            members = []
            for name, text in list(vars(cls).items()):
                if name.isupper() and type(text) is str:
                    members.append(cls(text))
                    setattr(cls, name, members[-1])
            cls._members = tuple(members)

        @property
        def value(self) -> str:
            return str(self)

        def __repr__(self) -> str:
            return f"{type(self).__name__}({str.__repr__(self)})"
