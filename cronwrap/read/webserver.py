"""The HTTP server under ``cronwrap serve``: waitress, with the guards that a client nobody
vouches for needs, fitted where waitress is made to be extended (its server's
``channel_class`` and ``maintenance``, its channel's ``parser_class``).

- **No request body, ever.** No endpoint takes one, so a request whose header announces one
  (``Content-Length`` > 0, or chunked) is answered 413 when its header ends, before a byte of
  the body is read, and the connection closed. waitress itself reads a body into memory, then
  a temporary file, up to ``max_request_body_size`` (1 GiB) before the application can say no.
- **A header deadline.** A connection must finish a request's header within HEADER_DEADLINE
  seconds of opening, or of its previous answer, however slowly it trickles. waitress's only
  clock, ``channel_timeout`` (120 s), restarts at every byte received and applies only to a
  connection without a request in progress.
- **Room for every new connection.** waitress stops accepting at ``connection_limit`` (100):
  100 idle sockets, or 100 that sent half a header, and an authorised request waits in the
  kernel's backlog for two minutes (measured: /healthz unanswered after 60 s; with the rule
  below, answered in 7-13 ms). Here a new connection is always accepted while some other
  merely waits for a header: beyond PER_CLIENT connections from its address, that address's
  oldest waiting one is closed; beyond CONNECTIONS in all, the oldest waiting one of any
  address. A connection whose request is being answered is never closed for room. So an
  address cannot crowd out the others, nor an idle crowd a person or a scraper with its token.
  waitress has nothing per address; accepting is the one point where a connection and its
  address are both known, hence the hook in the channel's constructor.

waitress is imported only by ``serve`` (``run`` never imports this module).
"""

from __future__ import annotations

import time

from waitress.adjustments import Adjustments
from waitress.channel import HTTPChannel
from waitress.parser import HTTPRequestParser
from waitress.server import MultiSocketServer, TcpWSGIServer
from waitress.task import ThreadedTaskDispatcher
from waitress.utilities import RequestEntityTooLarge

from cronwrap.record import TYPE_CHECKING

if TYPE_CHECKING:
    from socket import _RetAddress, socket
    from wsgiref.types import WSGIApplication

    from waitress.wasyncore import _SocketMap

HEADER_DEADLINE = 10.0  # seconds to send a request's header, from the connection or last answer
PER_CLIENT = 20  # connections waiting for a header, per client address (a browser opens six)
CONNECTIONS = 100  # in all (waitress's own connection_limit)
# Bytes of a request's header, held per connection until it ends. waitress's 256 KiB let 95
# unfinished headers take 25 MB of the server (measured, VmRSS 34 -> 59 MB); at 32 KiB they
# are refused (431) and take nothing. A browser's header is a few KiB, a token at most 4.
HEADER_MAX = 32 * 1024
NO_BODY = b"413 Content Too Large: cronwrap serve takes no request body\n"


class NoBody(RequestEntityTooLarge):
    # types-waitress says the body is str; waitress's own Error.to_response returns bytes.
    def to_response(  # type: ignore[override]
            self, ident: str | None = None) -> tuple[str, list[tuple[str, str]], bytes]:
        return "413 Content Too Large", [("Content-Type", "text/plain; charset=utf-8")], NO_BODY


class Parser(HTTPRequestParser):
    """waitress's parser, refusing a body as soon as the header announces one."""

    def parse_header(self, header_plus: bytes) -> None:
        super().parse_header(header_plus)
        if self.chunked or self.content_length:
            # The request is complete without its body: waitress answers the error and closes
            # the connection, and the bytes of the body are never read (no 100 Continue either).
            self.body_rcv, self.chunked, self.content_length = None, False, 0
            self.expect_continue = False
            self.error = NoBody("")


class Channel(HTTPChannel):
    """One client connection. ``waiting_since``: when it began waiting for a request's header
    (None while a request of it is being answered)."""

    parser_class = Parser

    def __init__(self, server: Server, sock: socket, addr: _RetAddress, adj: Adjustments,
                 map: _SocketMap | None = None) -> None:
        super().__init__(server, sock, addr, adj, map)
        self.waiting_since: float | None = time.monotonic()
        server.guard.admit(self)

    def service(self) -> None:  # a worker thread answers one request
        self.waiting_since = None
        try:
            super().service()
        finally:
            self.waiting_since = time.monotonic()

    def waiting(self, now: float) -> float | None:
        """Seconds it has waited for a header; None while it has a request, an answer still to
        send, or is closing."""
        since = self.waiting_since
        if since is None or self.requests or self.total_outbufs_len or self.will_close:
            return None
        return now - since


class Guard:
    """The connections of every listening socket of one ``serve``, and the rules above."""

    def __init__(self, per_client: int = PER_CLIENT, total: int = CONNECTIONS,
                 deadline: float = HEADER_DEADLINE) -> None:
        self.per_client, self.total, self.deadline = per_client, total, deadline
        self.servers: list[Server] = []

    def channels(self) -> list[Channel]:
        return [c for s in self.servers for c in s.active_channels.values() if not c.will_close]

    def admit(self, new: Channel) -> None:
        """``new`` was just accepted (in the server's loop): make room beside it."""
        everyone = self.channels()
        peers = [c for c in everyone if c.addr[0] == new.addr[0]]
        if len(peers) > self.per_client:
            self.close_oldest_waiting(peers, new)
        elif len(everyone) > self.total:
            self.close_oldest_waiting(everyone, new)

    def close_oldest_waiting(self, channels: list[Channel], new: Channel) -> None:
        now = time.monotonic()
        waited = [(w, c) for c in channels if c is not new and (w := c.waiting(now)) is not None]
        if waited:
            max(waited, key=lambda pair: pair[0])[1].will_close = True
        else:  # every other one is being answered: this one must come back later
            new.will_close = True

    def enforce_deadline(self, channels: list[Channel]) -> None:
        now = time.monotonic()
        for channel in channels:
            waited = channel.waiting(now)
            if waited is not None and waited > self.deadline:
                channel.will_close = True


class Server(TcpWSGIServer):
    """One listening socket; ``guard`` is shared by every socket of the ``serve``."""

    channel_class = Channel
    # types-waitress declares active_channels as one channel: waitress keeps a dict by fd.
    active_channels: dict[int, Channel]  # type: ignore[assignment]
    # Set by waitress's constructor from getsockname() (numeric strings); not in types-waitress.
    effective_host: str
    effective_port: str

    def __init__(self, application: WSGIApplication, map: _SocketMap, *,
                 dispatcher: ThreadedTaskDispatcher, adj: Adjustments,
                 sockinfo: tuple[int, int, int | None, _RetAddress], guard: Guard) -> None:
        self.guard = guard
        super().__init__(application, map, dispatcher=dispatcher, adj=adj, sockinfo=sockinfo)
        guard.servers.append(self)

    def maintenance(self, now: float) -> None:  # every adj.cleanup_interval, in the loop
        # types-waitress says int; waitress passes time.time().
        super().maintenance(now)  # type: ignore[arg-type]
        self.guard.enforce_deadline(list(self.active_channels.values()))


def create(app: WSGIApplication, host: str, port: int, threads: int,
           guard: Guard | None = None) -> tuple[MultiSocketServer, list[tuple[str, int]]]:
    """Bind every address ``host`` resolves to (as waitress does) and return the server, not
    yet running, with the addresses actually bound (numeric host, port). OSError when an
    address cannot be bound."""
    guard = guard or Guard()
    # cleanup_interval: how often maintenance() runs, so the header deadline is kept to the
    # second (waitress: every 30 s), a pass over at most CONNECTIONS channels. poll(), not
    # select(): no FD_SETSIZE ceiling on the descriptors the process may have.
    adj = Adjustments(host=host, port=port, threads=threads, ident="cronwrap",
                      expose_tracebacks=False, clear_untrusted_proxy_headers=True,
                      cleanup_interval=1, max_request_header_size=HEADER_MAX,
                      asyncore_use_poll=True)
    # waitress counts each socket's listener and wake-up pipe too; one connection beyond the
    # total is accepted so that admit() can close a waiting one for it.
    adj.connection_limit = guard.total + 2 * len(adj.listen) + 1
    socket_map: _SocketMap = {}
    dispatcher = ThreadedTaskDispatcher()
    servers: list[Server] = []
    try:
        # types-waitress: listen is list[str], the option as given; Adjustments turns it into
        # (family, socktype, proto, sockaddr) tuples.
        for info in adj.listen:
            servers.append(Server(app, socket_map, dispatcher=dispatcher, adj=adj,
                                  sockinfo=info, guard=guard))  # type: ignore[arg-type]
    except BaseException:
        for server in servers:
            server.close()
        raise
    dispatcher.set_thread_count(threads)  # threads only once every address is bound
    bound = [(str(s.effective_host), int(s.effective_port)) for s in servers]
    return MultiSocketServer(socket_map, adj, bound, dispatcher, servers[0].log_info), bound
