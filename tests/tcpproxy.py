"""A TCP proxy a test can cut: the database becomes unreachable, then reachable again."""

from __future__ import annotations

import socket
import threading
import time


class TcpProxy:
    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.port = 0
        self.listener: socket.socket | None = None
        self.conns: list[socket.socket] = []
        self.lock = threading.Lock()
        self.restore()

    def restore(self) -> None:
        """Listen (again, on the same port) and forward new connections."""
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self.port = listener.getsockname()[1]
        self.listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def cut(self) -> None:
        """Refuse new connections and break the open ones."""
        with self.lock:
            if self.listener is not None:
                try:  # wakes the thread blocked in accept(); close() alone would not
                    self.listener.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                self.listener.close()
                self.listener = None
            for conn in self.conns:
                try:
                    conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                conn.close()
            self.conns.clear()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                client.close()
                continue
            server.settimeout(None)
            with self.lock:
                self.conns += [client, server]
            for a, b, to_server in ((client, server, True), (server, client, False)):
                threading.Thread(target=self._pump, args=(a, b, to_server), daemon=True).start()

    def relay(self, data: bytes, to_server: bool) -> bool:
        """Called before ``data`` is forwarded; False drops the connection instead. Test
        proxies override it to freeze or to cut at a chosen moment."""
        return True

    def _pump(self, src: socket.socket, dst: socket.socket, to_server: bool) -> None:
        try:
            while data := src.recv(65536):
                if not self.relay(data, to_server):
                    break
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self) -> None:
        self.cut()


class FreezableProxy(TcpProxy):
    """A TcpProxy that can also freeze: connections stay open, bytes are taken, nothing is
    answered while ``frozen`` is set (a hung server, or a stuck middlebox, as the client sees
    it)."""

    def __init__(self, host: str, port: int) -> None:
        self.frozen = threading.Event()
        super().__init__(host, port)

    def relay(self, data: bytes, to_server: bool) -> bool:
        while self.frozen.is_set():
            time.sleep(0.02)
        return True
