"""moto's server, with DynamoDB requests handled one at a time.

moto applies a TransactWriteItems by checking and writing item after item and, when one
condition fails, restoring a copy of the whole table taken before it started. Served on many
threads (as `moto_server` does), two transactions can both pass a condition that only one of
them should pass, and a cancelled transaction can erase another request's committed write.
Real DynamoDB does neither, and the adapter tests check exactly those races (concurrent
fan-in), so this launcher serialises DynamoDB requests; everything else (SQS long polls)
stays concurrent. Same options as `moto_server`.
"""

import threading

import moto.server as server

_Dispatcher = server.DomainDispatcherApplication


class SerializedDynamoDB:
    """WSGI wrapper: one DynamoDB request at a time, others in parallel."""

    def __init__(self, *args, **kwargs):
        self.app = _Dispatcher(*args, **kwargs)
        self.lock = threading.Lock()

    def __call__(self, environ, start_response):
        if environ.get("HTTP_X_AMZ_TARGET", "").startswith("DynamoDB_"):
            with self.lock:
                return list(self.app(environ, start_response))
        return self.app(environ, start_response)

    def __getattr__(self, name):
        return getattr(self.app, name)


server.DomainDispatcherApplication = SerializedDynamoDB

if __name__ == "__main__":
    server.main()
