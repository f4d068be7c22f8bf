"""A private moto S3 server, the one ``scripts/s3-up.sh`` runs, with a bucket of many small objects made before
it serves: for row s2, which lists 100,000 objects. Run as a child of the bench (never imported by it):

python seeded_s3.py BUCKET PREFIX COUNT   -> prints "ready PORT SECONDS" once it serves, then serves

The objects are ``PREFIX/dNNNN/part-NNNNNNN.jsonl`` (1,000 to a "directory"), each one short JSON
line, put straight into moto's in-memory backend in this process: the same objects an HTTP PUT makes, made
without one. Over HTTP moto takes about 5 ms a request on this machine (its request dispatch, whatever the
client), so 100,000 PUTs would take 8 minutes before the row could start; this takes a few seconds. Listing
is then real S3 over HTTP, on 127.0.0.1, to a server that answers nothing else. Requests are logged to
standard error (one line each, as the shared server logs them), so the bench can count them by kind.
"""

from __future__ import annotations

import sys
import time


def main() -> None:
    bucket, prefix, count = sys.argv[1], sys.argv[2].strip("/"), int(sys.argv[3])
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.s3.models import s3_backends
    from moto.server import DomainDispatcherApplication, create_backend_app
    from werkzeug.serving import make_server

    start = time.perf_counter()
    backend = s3_backends[DEFAULT_ACCOUNT_ID]["global"]
    backend.create_bucket(bucket, "us-east-1")
    for i in range(count):
        backend.put_object(bucket, f"{prefix}/d{i // 1000:04d}/part-{i:07d}.jsonl", b'{"text": "x"}\n')
    seconds = time.perf_counter() - start
    server = make_server("127.0.0.1", 0, DomainDispatcherApplication(create_backend_app), threaded=True)
    print(f"ready {server.server_port} {seconds:.3f}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
